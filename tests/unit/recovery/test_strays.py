"""Workloads found on hardware an incident left out of service are moved, even after it closed."""

from __future__ import annotations

import pytest

from services.recovery.domain.catalog import FaultCatalog
from services.recovery.domain.classify import FaultKind
from services.recovery.domain.commands import MigrateWorkload
from services.recovery.domain.incidents import (
    Incident,
    IncidentState,
    RecoveryPolicy,
    adopt_workloads,
    check_deadline,
    drain_completed,
    drain_in_effect,
    leaves_out_of_service,
    move_strays,
    record_health_check,
)
from tests.unit.recovery.conftest import T0
from tests.unit.recovery.test_incidents import S, diagnosed, incident, run_migration


def _escalated_without_workloads(catalog: FaultCatalog) -> Incident:
    # A double-bit ECC burst on an idle GPU: drained to failed, nothing to move, escalated at once.
    draining = diagnosed(incident(catalog, FaultKind.ECC, workloads=()))
    escalated = drain_completed(draining.incident, at=T0 + 4 * S).incident
    assert escalated.state is IncidentState.ESCALATED
    return escalated


def test_a_placement_reported_after_the_gpus_incident_escalated_is_moved_off_the_gpu(
    catalog: FaultCatalog,
) -> None:
    escalated = _escalated_without_workloads(catalog)
    assert adopt_workloads(escalated, workload_ids=["wl-late"], at=T0 + 5 * S).ignored  # closed: no adoption
    moved = move_strays(escalated, workload_ids=["wl-late"])
    assert moved.commands == (MigrateWorkload(workload_id="wl-late", away_from_gpu="GPU-a"),)
    # The incident stays closed as it was; it only lists the workload it moved.
    after = moved.incident
    assert (after.state, after.closed_at, after.history) == (
        IncidentState.ESCALATED,
        escalated.closed_at,
        escalated.history,
    )
    assert after.workload_ids == ("wl-late",)


def test_a_node_wide_escalation_moves_strays_off_the_node(catalog: FaultCatalog) -> None:
    migrating = drain_completed(diagnosed(incident(catalog, FaultKind.XID, 79)).incident, at=T0 + 4 * S)
    verifying = run_migration(migrating.incident, "wl-1", start=5)
    escalated = record_health_check(verifying.incident, passed=False, at=T0 + 20 * S).incident
    moved = move_strays(escalated, workload_ids=["wl-late", "wl-late"])
    assert moved.commands == (MigrateWorkload(workload_id="wl-late", away_from_gpu=None),)
    assert moved.incident.workload_ids == ("wl-1", "wl-late")


def test_an_incident_escalated_by_its_deadline_before_the_drain_held_moves_its_workloads_later(
    catalog: FaultCatalog,
) -> None:
    draining = diagnosed(incident(catalog, FaultKind.XID, 48)).incident
    late = check_deadline(draining, now=T0 + 200 * S, policy=RecoveryPolicy()).incident
    assert leaves_out_of_service(late)
    moved = move_strays(late, workload_ids=["wl-1"])
    assert moved.commands == (MigrateWorkload(workload_id="wl-1", away_from_gpu="GPU-a"),)


def test_incidents_that_returned_or_never_drained_their_gpu_move_no_strays(catalog: FaultCatalog) -> None:
    migrating = drain_completed(diagnosed(incident(catalog, FaultKind.XID, 48)).incident, at=T0 + 4 * S)
    resolved = record_health_check(
        run_migration(migrating.incident, "wl-1", start=5).incident, passed=True, at=T0 + 20 * S
    ).incident
    escalated_at_once = diagnosed(incident(catalog, FaultKind.AGENT_SILENT)).incident
    assert escalated_at_once.state is IncidentState.ESCALATED
    restart = diagnosed(incident(catalog, FaultKind.XID, 13)).incident
    restart_late = check_deadline(restart, now=T0 + 200 * S, policy=RecoveryPolicy()).incident
    for closed in (resolved, escalated_at_once, restart_late):
        assert not leaves_out_of_service(closed)
        assert move_strays(closed, workload_ids=["wl-late"]).ignored
    assert move_strays(migrating.incident, workload_ids=["wl-late"]).ignored  # open: adoption's job
    assert move_strays(_escalated_without_workloads(catalog), workload_ids=[]).ignored


def test_a_restart_in_place_adopts_no_workload_placed_on_its_gpu(catalog: FaultCatalog) -> None:
    restarting = diagnosed(incident(catalog, FaultKind.XID, 13)).incident
    assert restarting.state is IncidentState.MIGRATING
    assert adopt_workloads(restarting, workload_ids=["wl-new"], at=T0 + 4 * S).ignored


@pytest.mark.parametrize(
    ("kind", "code", "health", "in_effect"),
    [
        (FaultKind.XID, 48, "draining", True),  # another incident drained it: no change to report
        (FaultKind.XID, 48, "failed", True),
        (FaultKind.XID, 48, "healthy", False),
        (FaultKind.XID, 48, None, False),  # never reported: inventory will report the drain
        (FaultKind.ECC, None, "draining", False),  # inventory fails a draining GPU, and says so
        (FaultKind.ECC, None, "failed", True),
        (FaultKind.XID, 79, "failed", False),  # node drains: the node's other GPUs report
    ],
)
def test_a_drain_of_a_gpu_already_out_of_service_is_in_effect_at_once(
    catalog: FaultCatalog, kind: FaultKind, code: int | None, health: str | None, in_effect: bool
) -> None:
    draining = diagnosed(incident(catalog, kind, code)).incident
    assert draining.state is IncidentState.DRAINING
    assert drain_in_effect(draining, gpu_health=health) is in_effect


def test_only_a_draining_incident_can_have_its_drain_in_effect(catalog: FaultCatalog) -> None:
    migrating = drain_completed(diagnosed(incident(catalog, FaultKind.XID, 48)).incident, at=T0 + 4 * S)
    assert not drain_in_effect(migrating.incident, gpu_health="draining")
