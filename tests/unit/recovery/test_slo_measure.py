"""The SLO measure: detection to the host running the workloads again, over incidents that affected one."""

from __future__ import annotations

from datetime import timedelta

from services.recovery.domain.catalog import FaultCatalog
from services.recovery.domain.classify import FaultKind, FaultSignal, classify
from services.recovery.domain.detection import open_incident
from services.recovery.domain.incidents import (
    Incident,
    IncidentState,
    drain_completed,
    record_progress,
    start_diagnosis,
    start_remediation,
)
from services.recovery.domain.slo import by_fault_type, summarize, time_to_recover
from services.recovery.domain.workload_moves import MigrationPhase
from tests.unit.recovery.conftest import T0

S = timedelta(seconds=1)


def migrating(catalog: FaultCatalog, *, xid: int, workloads: tuple[str, ...], gpu: str = "GPU-a") -> Incident:
    sig = FaultSignal(kind=FaultKind.XID, xid=xid, gpu=gpu, node="node-1", at=T0)
    opened = open_incident(
        incident_id=f"inc-{xid}-{gpu}",
        signal=sig,
        classification=classify(sig, catalog=catalog),
        workload_ids=workloads,
        detected_at=T0 + S,
    )
    diagnosing = start_diagnosis(opened, at=T0 + 2 * S).incident
    draining = start_remediation(diagnosing, diagnosis=None, at=T0 + 3 * S).incident
    moving = drain_completed(draining, at=T0 + 4 * S).incident
    assert moving.state is (IncidentState.MIGRATING if workloads else IncidentState.VERIFYING)
    return moving


def ran(incident: Incident, workload: str, *, heard_s: float, host_s: float | None) -> Incident:
    host_at = None if host_s is None else T0 + host_s * S
    step = record_progress(
        incident,
        workload_id=workload,
        phase=MigrationPhase.RUNNING,
        percent=100,
        at=T0 + heard_s * S,
        host_at=host_at,
    )
    assert not step.ignored
    return step.incident


def recovered(catalog: FaultCatalog, *, xid: int, after_s: float, gpu: str = "GPU-a") -> Incident:
    """An incident whose one workload the host ran again after_s seconds after detection (at T0 + 1 s)."""
    moving = migrating(catalog, xid=xid, workloads=("wl-1",), gpu=gpu)
    return ran(moving, "wl-1", heard_s=1 + after_s + 30, host_s=1 + after_s)


def test_recovery_ends_when_the_host_ran_the_workload_not_when_recovery_heard_of_it(
    catalog: FaultCatalog,
) -> None:
    done = ran(migrating(catalog, xid=48, workloads=("wl-1",)), "wl-1", heard_s=200, host_s=50)
    assert done.recovered_at == T0 + 50 * S
    assert time_to_recover(done) == 49 * S
    # The state change itself happens when recovery acts on the report.
    assert done.history[-1].at == T0 + 200 * S


def test_recovery_ends_with_the_last_workload_the_hosts_ran_whatever_order_the_reports_came_in(
    catalog: FaultCatalog,
) -> None:
    moving = migrating(catalog, xid=95, workloads=("wl-1", "wl-2"))
    half = ran(moving, "wl-1", heard_s=90, host_s=80)
    done = ran(half, "wl-2", heard_s=95, host_s=40)  # reported last, ran first
    assert done.state is IncidentState.VERIFYING
    assert done.recovered_at == T0 + 80 * S


def test_a_report_without_a_host_instant_counts_from_when_recovery_heard_of_it(catalog: FaultCatalog) -> None:
    done = ran(migrating(catalog, xid=48, workloads=("wl-1",)), "wl-1", heard_s=70, host_s=None)
    assert done.recovered_at == T0 + 70 * S


def test_incidents_that_affected_no_workload_are_counted_but_not_measured(catalog: FaultCatalog) -> None:
    idle = migrating(catalog, xid=48, workloads=(), gpu="GPU-b")
    assert idle.recovered_at is not None  # nothing to move: trivially safe, but nothing was recovered
    stats = summarize([idle, recovered(catalog, xid=48, after_s=100)])
    assert (stats.incidents, stats.measured, stats.recovered) == (2, 1, 1)
    assert (stats.share_within_1m, stats.share_within_3m) == (0.0, 1.0)
    assert stats.recover_p50_s == 100.0


def test_an_incident_still_recovering_is_a_miss_only_once_the_threshold_has_passed(
    catalog: FaultCatalog,
) -> None:
    moving = migrating(catalog, xid=48, workloads=("wl-1",), gpu="GPU-c")
    fast = recovered(catalog, xid=48, after_s=20)
    # 90 s after detection: late for 1 minute, not yet for 3.
    early = summarize([moving, fast], as_of=moving.detected_at + 90 * S)
    assert (early.share_within_1m, early.share_within_3m) == (0.5, 1.0)
    late = summarize([moving, fast], as_of=moving.detected_at + 180 * S)
    assert late.share_within_3m == 0.5
    # Without an instant to judge by (a finished run), every unrecovered incident is a miss.
    assert summarize([moving, fast]).share_within_3m == 0.5


def test_nothing_judged_yet_gives_no_share_rather_than_zero(catalog: FaultCatalog) -> None:
    moving = migrating(catalog, xid=48, workloads=("wl-1",))
    stats = summarize([moving], as_of=moving.detected_at + 10 * S)
    assert (stats.measured, stats.share_within_1m, stats.share_within_3m) == (1, None, None)


def test_figures_are_kept_per_fault_class(catalog: FaultCatalog) -> None:
    incidents = [
        recovered(catalog, xid=48, after_s=30, gpu="GPU-a"),
        recovered(catalog, xid=48, after_s=150, gpu="GPU-b"),
        recovered(catalog, xid=95, after_s=200, gpu="GPU-c"),
    ]
    stats = by_fault_type(incidents)
    assert sorted(stats) == ["xid_48", "xid_95"]
    dbe = stats["xid_48"]
    assert (dbe.measured, dbe.share_within_1m, dbe.share_within_3m) == (2, 0.5, 1.0)
    assert (dbe.recover_p50_s, dbe.recover_p99_s) == (30.0, 150.0)
    assert (stats["xid_95"].share_within_1m, stats["xid_95"].share_within_3m) == (0.0, 0.0)
