"""The deadline waits for migrations that are visibly moving, up to a cap (issue 17, item 17)."""

from __future__ import annotations

from datetime import timedelta

from services.recovery.domain.catalog import FaultCatalog
from services.recovery.domain.classify import FaultKind, FaultSignal, classify
from services.recovery.domain.detection import open_incident
from services.recovery.domain.incidents import (
    Incident,
    IncidentState,
    RecoveryPolicy,
    check_deadline,
    deadline_of,
    drain_completed,
    record_progress,
    start_diagnosis,
    start_remediation,
    still_moving,
)
from services.recovery.domain.workload_moves import MigrationPhase
from tests.unit.recovery.conftest import T0

S = timedelta(seconds=1)
POLICY = RecoveryPolicy(
    deadline=timedelta(minutes=3), progress_grace=timedelta(seconds=30), deadline_cap=timedelta(minutes=6)
)


def _migrating(catalog: FaultCatalog, *, workloads: tuple[str, ...] = ("w1", "w2")) -> Incident:
    signal = FaultSignal(kind=FaultKind.XID, xid=48, gpu="g1", node="n1", at=T0)
    opened = open_incident(
        incident_id="inc-1",
        signal=signal,
        classification=classify(signal, catalog=catalog),
        workload_ids=workloads,
        detected_at=T0,
    )
    draining = start_remediation(start_diagnosis(opened, at=T0 + S).incident, diagnosis=None, at=T0 + 2 * S)
    migrating = drain_completed(draining.incident, at=T0 + 3 * S).incident
    assert migrating.state is IncidentState.MIGRATING
    return migrating


def _step(incident: Incident, second: int, percent: int, workload: str = "w1") -> Incident:
    phase = MigrationPhase.TRANSFER if percent < 100 else MigrationPhase.RUNNING
    moved = record_progress(incident, workload_id=workload, phase=phase, percent=percent, at=T0 + second * S)
    assert not moved.ignored
    return moved.incident


def test_a_migration_still_moving_at_the_deadline_is_not_escalated(catalog: FaultCatalog) -> None:
    incident = _step(_migrating(catalog), 170, 40)
    assert check_deadline(incident, now=T0 + 180 * S, policy=POLICY).ignored
    assert check_deadline(incident, now=T0 + 199 * S, policy=POLICY).ignored
    # Nothing moved for the grace period after its last step: now it escalates.
    late = check_deadline(incident, now=T0 + 200 * S, policy=POLICY)
    assert late.incident.state is IncidentState.ESCALATED
    assert late.incident.escalation_reason == "not recovered within 0:03:00"


def test_migrations_that_stopped_moving_escalate_at_the_deadline(catalog: FaultCatalog) -> None:
    incident = _step(_migrating(catalog), 60, 40)
    assert check_deadline(incident, now=T0 + 180 * S, policy=POLICY).incident.state is IncidentState.ESCALATED


def test_progress_keeps_the_incident_open_only_up_to_the_cap(catalog: FaultCatalog) -> None:
    incident = _migrating(catalog)
    for second, percent in zip(range(170, 400, 10), range(10, 100, 3), strict=False):
        incident = _step(incident, second, percent)
    assert deadline_of(incident, policy=POLICY) == T0 + timedelta(minutes=6)
    assert check_deadline(incident, now=T0 + 359 * S, policy=POLICY).ignored
    assert check_deadline(incident, now=T0 + 360 * S, policy=POLICY).incident.state is IncidentState.ESCALATED


def test_a_migration_finishing_is_progress_and_so_is_the_reset_it_leads_to(catalog: FaultCatalog) -> None:
    incident = _step(_migrating(catalog, workloads=("w1",)), 175, 100)  # w1 runs again: reset asked
    assert incident.state is IncidentState.VERIFYING
    assert deadline_of(incident, policy=POLICY) == T0 + 205 * S
    assert check_deadline(incident, now=T0 + 190 * S, policy=POLICY).ignored
    assert check_deadline(incident, now=T0 + 205 * S, policy=POLICY).incident.state is IncidentState.ESCALATED


def test_a_draining_incident_escalates_at_the_plain_deadline(catalog: FaultCatalog) -> None:
    signal = FaultSignal(kind=FaultKind.XID, xid=48, gpu="g1", node="n1", at=T0)
    opened = open_incident(
        incident_id="inc-1",
        signal=signal,
        classification=classify(signal, catalog=catalog),
        workload_ids=("w1",),
        detected_at=T0,
    )
    draining = start_remediation(start_diagnosis(opened, at=T0 + S).incident, diagnosis=None, at=T0 + 170 * S)
    assert draining.incident.state is IncidentState.DRAINING
    assert deadline_of(draining.incident, policy=POLICY) == T0 + timedelta(minutes=3)


def test_another_incident_leaves_a_workload_to_the_open_incident_still_moving_it(
    catalog: FaultCatalog,
) -> None:
    incident = _migrating(catalog)
    assert still_moving(incident, "w1")
    assert not still_moving(incident, "w9")
    assert not still_moving(_step(incident, 10, 100), "w1")  # it runs again: a new fault may move it
    closed = check_deadline(incident, now=T0 + 180 * S, policy=POLICY).incident
    assert not still_moving(closed, "w1")
