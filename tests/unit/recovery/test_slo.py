from __future__ import annotations

from datetime import timedelta

import pytest

from services.recovery.domain.catalog import Action, Owner, Severity
from services.recovery.domain.classify import Classification
from services.recovery.domain.incidents import Incident
from services.recovery.domain.slo import (
    by_fault_type,
    by_period,
    percentile,
    summarize,
    time_to_detect,
    time_to_recover,
)
from tests.unit.recovery.conftest import T0


def incident(
    *, fault_type: str = "xid_48", fault_s: float = 0, detect_s: float = 2, recover_s: float | None = 30
) -> Incident:
    fault_at = T0 + timedelta(seconds=fault_s)
    detected_at = fault_at + timedelta(seconds=detect_s)
    classification = Classification(
        fault_type=fault_type,
        severity=Severity.FATAL,
        owner=Owner.MEMORY,
        action=Action.DRAIN_AND_RESET,
        recoverable=True,
    )
    return Incident(
        id=f"inc-{fault_s}-{fault_type}",
        classification=classification,
        gpu="GPU-a",
        node="node-1",
        fault_at=fault_at,
        detected_at=detected_at,
        last_seen=fault_at,
        workload_ids=("w1",),
        recovered_at=None if recover_s is None else detected_at + timedelta(seconds=recover_s),
    )


def test_time_to_detect_runs_from_the_fault_to_detection() -> None:
    assert time_to_detect(incident(detect_s=4)) == timedelta(seconds=4)


def test_time_to_detect_is_never_negative_under_clock_skew() -> None:
    assert time_to_detect(incident(detect_s=-1)) == timedelta(0)


def test_time_to_recover_runs_from_detection_to_workloads_running() -> None:
    assert time_to_recover(incident(recover_s=45)) == timedelta(seconds=45)
    assert time_to_recover(incident(recover_s=None)) is None


def test_percentiles_use_the_nearest_observed_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile([7.0], 99) == 7.0
    assert percentile([], 50) is None


def test_a_percentile_outside_the_range_is_refused() -> None:
    with pytest.raises(ValueError, match="outside"):
        percentile([1.0], 0)


def test_shares_count_unrecovered_incidents_as_missing_the_slo() -> None:
    stats = summarize(
        [incident(recover_s=30), incident(recover_s=90), incident(recover_s=200), incident(recover_s=None)]
    )
    assert (stats.incidents, stats.recovered) == (4, 3)
    assert stats.share_within_1m == 0.25
    assert stats.share_within_3m == 0.5


def test_exactly_one_minute_counts_as_within_one_minute() -> None:
    assert summarize([incident(recover_s=60)]).share_within_1m == 1.0


def test_summary_reports_p50_and_p99_of_detect_and_recover_times() -> None:
    stats = summarize([incident(detect_s=d, recover_s=r) for d, r in [(1, 10), (2, 20), (3, 30), (10, 300)]])
    assert (stats.detect_p50_s, stats.detect_p99_s) == (2.0, 10.0)
    assert (stats.recover_p50_s, stats.recover_p99_s) == (20.0, 300.0)


def test_an_empty_set_has_no_figures_rather_than_zeroes() -> None:
    stats = summarize([])
    assert stats.incidents == 0
    assert stats.share_within_1m is None
    assert stats.recover_p50_s is None


def test_statistics_split_by_fault_type() -> None:
    stats = by_fault_type([incident(fault_type="xid_48"), incident(fault_type="xid_79", recover_s=None)])
    assert stats["xid_48"].share_within_1m == 1.0
    assert stats["xid_79"].recovered == 0


def test_statistics_split_by_period_of_the_fault_time() -> None:
    hour = timedelta(hours=1)
    incidents = [incident(fault_s=10), incident(fault_s=3599), incident(fault_s=3600), incident(fault_s=-5)]
    stats = by_period(incidents, origin=T0, period=hour)
    assert sorted(stats) == [T0, T0 + hour]
    assert stats[T0].incidents == 2
    assert stats[T0 + hour].incidents == 1


def test_a_non_positive_period_is_refused() -> None:
    with pytest.raises(ValueError, match="positive"):
        by_period([], origin=T0, period=timedelta(0))
