from __future__ import annotations

from datetime import timedelta

import pytest

from services.recovery.domain.catalog import FaultCatalog
from services.recovery.domain.classify import FaultKind, FaultSignal, classify
from services.recovery.domain.commands import (
    DrainGpu,
    DrainNode,
    Escalate,
    MigrateWorkload,
    RebootNode,
    ResetGpu,
    RestartWorkload,
    ReturnGpuToService,
    ReturnNodeToService,
)
from services.recovery.domain.detection import open_incident
from services.recovery.domain.incidents import (
    Incident,
    IncidentState,
    RecoveryPolicy,
    Transition,
    check_deadline,
    drain_completed,
    record_failure,
    record_health_check,
    record_progress,
    start_diagnosis,
    start_remediation,
)
from services.recovery.domain.workload_moves import MigrationPhase
from tests.unit.recovery.conftest import T0

S = timedelta(seconds=1)
ALL_PHASES = [
    MigrationPhase.CHECKPOINT,
    MigrationPhase.TRANSFER,
    MigrationPhase.RESTORE,
    MigrationPhase.RUNNING,
]


def incident(
    catalog: FaultCatalog, kind: FaultKind, code: int | None = None, workloads: tuple[str, ...] = ("wl-1",)
) -> Incident:
    sig = FaultSignal(kind=kind, xid=code, gpu="GPU-a", node="node-1", at=T0)
    return open_incident(
        incident_id="inc-1",
        signal=sig,
        classification=classify(sig, catalog=catalog),
        workload_ids=workloads,
        detected_at=T0 + S,
    )


def diagnosed(inc: Incident) -> Transition:
    return start_remediation(start_diagnosis(inc, at=T0 + 2 * S).incident, diagnosis=None, at=T0 + 3 * S)


def run_migration(inc: Incident, workload: str, start: int) -> Transition:
    transition = Transition(incident=inc)
    for step, phase in enumerate(ALL_PHASES):
        percent = (step + 1) * 25
        transition = record_progress(
            transition.incident,
            workload_id=workload,
            phase=phase,
            percent=percent,
            at=T0 + (start + step) * S,
        )
        assert not transition.ignored
    return transition


def test_a_double_bit_ecc_fault_is_drained_migrated_reset_and_returned_to_service(
    catalog: FaultCatalog,
) -> None:
    inc = incident(catalog, FaultKind.XID, 48)
    diagnosing = start_diagnosis(inc, at=T0 + 2 * S)
    assert (diagnosing.incident.state, diagnosing.commands) == (IncidentState.DIAGNOSING, ())

    draining = start_remediation(diagnosing.incident, diagnosis=None, at=T0 + 3 * S)
    assert draining.incident.state is IncidentState.DRAINING
    assert draining.commands == (DrainGpu(gpu="GPU-a", reason="inc-1 xid_48"),)

    migrating = drain_completed(draining.incident, at=T0 + 4 * S)
    assert migrating.incident.state is IncidentState.MIGRATING
    assert migrating.commands == (
        MigrateWorkload(workload_id="wl-1", away_from_gpu="GPU-a", keep_priority=True),
    )

    verifying = run_migration(migrating.incident, "wl-1", start=5)
    assert verifying.incident.state is IncidentState.VERIFYING
    assert verifying.incident.recovered_at == T0 + 8 * S
    assert verifying.commands == (ResetGpu(gpu="GPU-a"),)

    resolved = record_health_check(verifying.incident, passed=True, at=T0 + 20 * S)
    assert resolved.incident.state is IncidentState.RESOLVED
    assert resolved.incident.closed_at == T0 + 20 * S
    assert resolved.commands == (ReturnGpuToService(gpu="GPU-a"),)
    assert [c.state for c in resolved.incident.history] == [
        IncidentState.DETECTED,
        IncidentState.DIAGNOSING,
        IncidentState.DRAINING,
        IncidentState.MIGRATING,
        IncidentState.VERIFYING,
        IncidentState.RESOLVED,
    ]


def test_a_gpu_off_the_bus_drains_and_reboots_the_whole_node(catalog: FaultCatalog) -> None:
    draining = diagnosed(incident(catalog, FaultKind.XID, 79))
    assert draining.commands == (DrainNode(node="node-1", reason="inc-1 xid_79"),)
    migrating = drain_completed(draining.incident, at=T0 + 4 * S)
    assert migrating.commands == (MigrateWorkload(workload_id="wl-1", away_from_gpu=None),)
    verifying = run_migration(migrating.incident, "wl-1", start=5)
    assert verifying.commands == (RebootNode(node="node-1"),)
    resolved = record_health_check(verifying.incident, passed=True, at=T0 + 60 * S)
    assert resolved.commands == (ReturnNodeToService(node="node-1"),)


def test_an_application_fault_restarts_the_workload_without_draining(catalog: FaultCatalog) -> None:
    migrating = diagnosed(incident(catalog, FaultKind.XID, 13))
    assert migrating.incident.state is IncidentState.MIGRATING
    assert migrating.commands == (RestartWorkload(workload_id="wl-1"),)
    resolved = run_migration(migrating.incident, "wl-1", start=4)
    assert resolved.incident.state is IncidentState.RESOLVED
    assert resolved.commands == ()
    assert resolved.incident.recovered_at == T0 + 7 * S


def test_every_workload_must_run_again_before_the_gpu_is_reset(catalog: FaultCatalog) -> None:
    draining = diagnosed(incident(catalog, FaultKind.XID, 95, workloads=("wl-1", "wl-2")))
    migrating = drain_completed(draining.incident, at=T0 + 4 * S)
    assert len(migrating.commands) == 2
    half = run_migration(migrating.incident, "wl-1", start=5)
    assert half.incident.state is IncidentState.MIGRATING
    assert half.commands == ()
    done = run_migration(half.incident, "wl-2", start=10)
    assert done.incident.state is IncidentState.VERIFYING


def test_a_gpu_without_workloads_goes_straight_from_drained_to_reset(catalog: FaultCatalog) -> None:
    draining = diagnosed(incident(catalog, FaultKind.XID, 95, workloads=()))
    verifying = drain_completed(draining.incident, at=T0 + 4 * S)
    assert verifying.incident.state is IncidentState.VERIFYING
    assert verifying.commands == (ResetGpu(gpu="GPU-a"),)
    assert verifying.incident.recovered_at == T0 + 4 * S


def test_unrecoverable_hardware_escalates_once_its_workloads_are_safe(catalog: FaultCatalog) -> None:
    draining = diagnosed(incident(catalog, FaultKind.XID, 64))
    migrating = drain_completed(draining.incident, at=T0 + 4 * S)
    escalated = run_migration(migrating.incident, "wl-1", start=5)
    assert escalated.incident.state is IncidentState.ESCALATED
    assert escalated.incident.recovered_at == T0 + 8 * S
    assert len(escalated.commands) == 1
    assert isinstance(escalated.commands[0], Escalate)
    assert "hardware needs a person" in escalated.commands[0].reason


def test_a_fault_the_catalog_escalates_pages_a_person_right_after_diagnosis(catalog: FaultCatalog) -> None:
    escalated = diagnosed(incident(catalog, FaultKind.AGENT_SILENT))
    assert escalated.incident.state is IncidentState.ESCALATED
    assert isinstance(escalated.commands[0], Escalate)
    assert escalated.incident.recovered_at is None


def test_a_failed_health_check_escalates(catalog: FaultCatalog) -> None:
    draining = diagnosed(incident(catalog, FaultKind.XID, 48, workloads=()))
    verifying = drain_completed(draining.incident, at=T0 + 4 * S)
    failed = record_health_check(verifying.incident, passed=False, at=T0 + 30 * S)
    assert failed.incident.state is IncidentState.ESCALATED
    assert failed.incident.escalation_reason == "health check failed after reset"
    assert failed.commands == (Escalate(reason="inc-1 xid_48: health check failed after reset"),)


def test_a_failed_migration_escalates_the_incident(catalog: FaultCatalog) -> None:
    migrating = drain_completed(diagnosed(incident(catalog, FaultKind.XID, 48)).incident, at=T0 + 4 * S)
    failed = record_failure(migrating.incident, reason="no healthy GPU for wl-1", at=T0 + 9 * S)
    assert failed.incident.state is IncidentState.ESCALATED
    assert failed.incident.closed_at == T0 + 9 * S


def test_an_unfinished_incident_escalates_at_its_deadline(catalog: FaultCatalog) -> None:
    draining = diagnosed(incident(catalog, FaultKind.XID, 48)).incident
    policy = RecoveryPolicy()
    just_before = check_deadline(draining, now=T0 + S + policy.deadline - S, policy=policy)
    assert just_before.ignored
    assert just_before.incident.state is IncidentState.DRAINING
    at_deadline = check_deadline(draining, now=T0 + S + policy.deadline, policy=policy)
    assert at_deadline.incident.state is IncidentState.ESCALATED
    assert at_deadline.incident.escalation_reason == "not recovered within 0:03:00"


def test_a_resolved_incident_never_escalates_for_its_deadline(catalog: FaultCatalog) -> None:
    resolved = run_migration(diagnosed(incident(catalog, FaultKind.XID, 13)).incident, "wl-1", start=4)
    late = check_deadline(resolved.incident, now=T0 + timedelta(hours=1), policy=RecoveryPolicy())
    assert late.ignored
    assert late.incident.state is IncidentState.RESOLVED


def test_a_closed_incident_ignores_failures(catalog: FaultCatalog) -> None:
    escalated = record_failure(incident(catalog, FaultKind.XID, 48), reason="first", at=T0 + 2 * S).incident
    again = record_failure(escalated, reason="second", at=T0 + 3 * S)
    assert again.ignored
    assert again.incident.escalation_reason == "first"


@pytest.mark.parametrize(
    "event",
    ["drain_completed", "health_check", "progress", "remediation"],
)
def test_events_that_do_not_fit_the_state_are_ignored(catalog: FaultCatalog, event: str) -> None:
    detected = incident(catalog, FaultKind.XID, 48)
    transitions = {
        "drain_completed": lambda: drain_completed(detected, at=T0),
        "health_check": lambda: record_health_check(detected, passed=True, at=T0),
        "progress": lambda: record_progress(
            detected, workload_id="wl-1", phase=MigrationPhase.RUNNING, percent=100, at=T0
        ),
        "remediation": lambda: start_remediation(detected, diagnosis=None, at=T0),
    }
    result = transitions[event]()
    assert result.ignored
    assert result.incident == detected
    assert result.commands == ()


def test_a_duplicate_diagnosis_start_is_ignored(catalog: FaultCatalog) -> None:
    diagnosing = start_diagnosis(incident(catalog, FaultKind.XID, 48), at=T0 + 2 * S).incident
    assert start_diagnosis(diagnosing, at=T0 + 3 * S).ignored


def test_progress_for_a_workload_not_in_the_incident_is_ignored(catalog: FaultCatalog) -> None:
    migrating = drain_completed(diagnosed(incident(catalog, FaultKind.XID, 48)).incident, at=T0 + 4 * S)
    result = record_progress(
        migrating.incident, workload_id="wl-other", phase=MigrationPhase.CHECKPOINT, percent=10, at=T0 + 5 * S
    )
    assert result.ignored


def test_out_of_order_progress_leaves_the_migration_where_it_was(catalog: FaultCatalog) -> None:
    migrating = drain_completed(diagnosed(incident(catalog, FaultKind.XID, 48)).incident, at=T0 + 4 * S)
    ahead = record_progress(
        migrating.incident, workload_id="wl-1", phase=MigrationPhase.RESTORE, percent=70, at=T0 + 5 * S
    )
    stale = record_progress(
        ahead.incident, workload_id="wl-1", phase=MigrationPhase.TRANSFER, percent=40, at=T0 + 6 * S
    )
    assert stale.ignored
    (migration,) = stale.incident.migrations
    assert (migration.phase, migration.percent) == (MigrationPhase.RESTORE, 70)


def test_an_incident_round_trips_through_json_for_persistence(catalog: FaultCatalog) -> None:
    migrating = drain_completed(diagnosed(incident(catalog, FaultKind.XID, 48)).incident, at=T0 + 4 * S)
    assert Incident.model_validate_json(migrating.incident.model_dump_json()) == migrating.incident
    assert Transition.model_validate_json(migrating.model_dump_json()) == migrating
