"""Query beyond what promtool can compare: its shape, what it reads, errors and NaN results."""

from __future__ import annotations

import math
import time

import pytest

from services.alerting.domain.promql import STALE_NAN, PromQLError, Query, SeriesStore


def _store(*series: tuple[dict[str, str], float]) -> SeriesStore:
    store = SeriesStore()
    for labels, value in series:
        store.add(labels, 100.0, value)
    return store


def test_metric_names_are_every_name_the_expression_selects() -> None:
    query = Query.parse('sum(rate(a_total[5m])) / on() group_left count(b{x="1"} or c offset 1h) > bool 2')
    assert query.metric_names == frozenset({"a_total", "b", "c"})
    assert Query.parse("time() + 1").metric_names == frozenset()
    assert Query.parse('{__name__="up", job="a"}').metric_names == frozenset({"up"})


def test_the_horizon_is_the_longest_range_plus_offset_plus_the_lookback() -> None:
    assert Query.parse("up").horizon == 300
    assert Query.parse("rate(a[10m] offset 5m) + up offset 2m").horizon == 15 * 60 + 300
    assert Query.parse("up offset -10m").horizon == 300
    assert Query.parse("vector(1)").horizon == 300


def test_a_scalar_result_is_one_sample_without_labels() -> None:
    assert Query.parse("1 + time()").instant(SeriesStore(), 60.5) == [({}, 61.5)]


def test_the_result_labels_are_fresh_dicts_the_caller_may_change() -> None:
    store = _store(({"__name__": "up", "job": "a"}, 1.0))
    first = Query.parse("up").instant(store, 100)
    first[0][0]["job"] = "changed"
    assert Query.parse("up").instant(store, 100) == [({"__name__": "up", "job": "a"}, 1.0)]


def test_same_labelset_after_dropping_the_name_is_a_promql_error_at_evaluation() -> None:
    store = _store(({"__name__": "a", "job": "x"}, 1.0), ({"__name__": "b", "job": "x"}, 2.0))
    assert len(Query.parse("a or b").instant(store, 100)) == 1  # matched on job: b is left out
    with pytest.raises(PromQLError, match="vector cannot contain metrics with the same labelset"):
        Query.parse("(a or on(__name__) b) + 1").instant(store, 100)
    with pytest.raises(PromQLError, match="same labelset"):
        Query.parse("-(a or on(__name__) b)").instant(store, 100)


def test_many_to_many_matching_is_a_promql_error_at_evaluation() -> None:
    store = _store(
        ({"__name__": "a", "job": "x", "i": "1"}, 1.0),
        ({"__name__": "a", "job": "x", "i": "2"}, 1.0),
        ({"__name__": "b", "job": "x", "i": "1"}, 1.0),
        ({"__name__": "b", "job": "x", "i": "2"}, 1.0),
    )
    with pytest.raises(PromQLError, match="many-to-many matching not allowed"):
        Query.parse("a + on(job) b").instant(store, 100)
    with pytest.raises(PromQLError, match="many-to-one matching must be explicit"):
        Query.parse("a + on(job) sum by (job) (b)").instant(store, 100)
    assert len(Query.parse("a + on(job) group_left sum by (job) (b)").instant(store, 100)) == 2


def test_nan_results_promtool_cannot_compare_are_still_answered() -> None:
    store = _store(({"__name__": "up", "job": "a"}, 0.0), ({"__name__": "up", "job": "b"}, 1.0))
    [(_, nan_scalar)] = Query.parse("scalar(up)").instant(store, 100)  # two series: NaN
    assert math.isnan(nan_scalar)
    answers = {labels["job"]: v for labels, v in Query.parse("up / 0").instant(store, 100)}
    assert math.isnan(answers["a"])
    assert answers["b"] == math.inf
    assert Query.parse("up > 0").instant(store, 100) == [({"__name__": "up", "job": "b"}, 1.0)]


def test_a_stale_marker_hides_the_series_until_a_new_sample_arrives() -> None:
    store = SeriesStore()
    up = {"__name__": "up"}
    store.add(up, 0, 1.0)
    store.add(up, 15, STALE_NAN)
    store.add(up, 45, 2.0)
    query = Query.parse("up")
    assert query.instant(store, 10) == [(up, 1.0)]
    assert query.instant(store, 30) == []
    assert query.instant(store, 50) == [(up, 2.0)]
    assert Query.parse("count_over_time(up[1m])").instant(store, 50) == [({}, 2.0)]


def test_ten_thousand_gpus_evaluate_well_inside_a_fifteen_second_cycle() -> None:
    store = SeriesStore()
    for gpu in range(10_000):
        labels = {"__name__": "gpu_temp_c", "gpu": f"GPU-{gpu}", "node": f"n{gpu // 8}"}
        for step in range(21):
            store.add(labels, step * 15.0, 40.0 + (gpu + step) % 50)
    query = Query.parse("max by (node) (avg_over_time(gpu_temp_c[5m])) > 60 or absent(gpu_temp_c)")
    started = time.perf_counter()
    answer = query.instant(store, 300.0)
    elapsed = time.perf_counter() - started
    assert answer
    assert elapsed < 5.0, f"{elapsed:.2f}s for 10,000 series"
