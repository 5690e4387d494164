"""SeriesStore: samples in time order per series, the staleness marker, trimming."""

from __future__ import annotations

import math
import struct

from services.alerting.domain.promql import STALE_NAN, SeriesStore, is_stale
from services.alerting.domain.promql.store import Series

UP = {"__name__": "up", "job": "a"}


def test_the_stale_marker_is_prometheus_bit_pattern_and_only_it_is_stale() -> None:
    assert struct.pack(">d", STALE_NAN).hex() == "7ff0000000000002"
    assert is_stale(STALE_NAN)
    assert not is_stale(math.nan)
    assert not is_stale(0.0)
    assert not is_stale(math.inf)


def test_len_counts_series_not_samples_and_empty_labels_are_no_labels() -> None:
    store = SeriesStore()
    store.add(UP, 0, 1)
    store.add(UP, 15, 1)
    store.add({**UP, "zone": ""}, 30, 1)  # Prometheus treats an empty label as absent: the same series
    store.add({**UP, "job": "b"}, 0, 1)
    store.add({"__name__": "down"}, 0, 1)
    assert len(store) == 3
    assert [s.times for s in store.named("up")] == [[0, 15_000, 30_000], [0]]


def test_a_late_sample_is_put_in_time_order_and_a_repeated_time_replaces_the_value() -> None:
    series = Series(labels=dict(UP))
    for t, v in [(30, 3.0), (10, 1.0), (20, 2.0), (20, 2.5), (40, 4.0)]:
        series.add(t, v)
    assert series.times == [10, 20, 30, 40]
    assert series.values == [1.0, 2.5, 3.0, 4.0]


def test_trim_drops_older_samples_and_the_series_left_empty() -> None:
    store = SeriesStore()
    store.add(UP, 0, 1)
    store.add(UP, 60, 2)
    store.add({**UP, "job": "old"}, 10, 1)
    store.trim(before=60)
    assert len(store) == 1
    assert [(s.times, s.values) for s in store.named("up")] == [([60_000], [2.0])]
    store.trim(before=61)
    assert len(store) == 0
    assert list(store.named("up")) == []


def test_the_lookback_window_is_closed_and_a_stale_marker_ends_the_series() -> None:
    series = Series(labels=dict(UP), times=[0], values=[1.0])
    assert series.latest(300_000, 300_000) == (0, 1.0)
    assert series.latest(300_001, 300_000) is None
    assert series.latest(-1, 300_000) is None
    series.add(60_000, STALE_NAN)
    assert series.latest(59_999, 300_000) == (0, 1.0)
    assert series.latest(60_000, 300_000) is None
    assert series.window(0, 60_000) == ([0], [1.0])


def test_series_come_back_in_label_order_whatever_order_they_arrived_in() -> None:
    store = SeriesStore()
    for job in ["c", "a", "b"]:
        store.add({**UP, "job": job}, 0, 1)
    assert [s.labels["job"] for s in store.named("up")] == ["a", "b", "c"]
    store.add({**UP, "job": "0"}, 0, 1)
    assert [s.labels["job"] for s in store.named("up")] == ["0", "a", "b", "c"]
