"""Workloads placed on a GPU after its fault was detected are moved away too (none stranded)."""

from __future__ import annotations

from services.recovery.domain.catalog import FaultCatalog
from services.recovery.domain.classify import FaultKind
from services.recovery.domain.commands import MigrateWorkload
from services.recovery.domain.incidents import IncidentState, adopt_workloads, drain_completed
from tests.unit.recovery.conftest import T0
from tests.unit.recovery.test_incidents import S, diagnosed, incident, run_migration


def test_a_workload_placed_while_draining_is_migrated_when_the_drain_completes(catalog: FaultCatalog) -> None:
    draining = diagnosed(incident(catalog, FaultKind.XID, 48))
    adopted = adopt_workloads(draining.incident, workload_ids=["wl-late"], at=T0 + 4 * S)
    assert adopted.commands == ()
    assert adopted.incident.state is IncidentState.DRAINING
    migrating = drain_completed(adopted.incident, at=T0 + 5 * S)
    assert {c.workload_id for c in migrating.commands if isinstance(c, MigrateWorkload)} == {
        "wl-1",
        "wl-late",
    }


def test_a_workload_placed_during_migration_gets_its_own_migration(catalog: FaultCatalog) -> None:
    migrating = drain_completed(diagnosed(incident(catalog, FaultKind.XID, 48)).incident, at=T0 + 4 * S)
    adopted = adopt_workloads(migrating.incident, workload_ids=["wl-late", "wl-1"], at=T0 + 5 * S)
    assert adopted.commands == (
        MigrateWorkload(workload_id="wl-late", away_from_gpu="GPU-a", keep_priority=True),
    )
    assert [m.workload_id for m in adopted.incident.migrations] == ["wl-1", "wl-late"]
    only_first = run_migration(adopted.incident, "wl-1", start=6)
    assert only_first.incident.state is IncidentState.MIGRATING  # wl-late still has to move
    both = run_migration(only_first.incident, "wl-late", start=10)
    assert both.incident.state is IncidentState.VERIFYING


def test_a_workload_found_while_verifying_sends_the_incident_back_to_migrating(catalog: FaultCatalog) -> None:
    migrating = drain_completed(diagnosed(incident(catalog, FaultKind.XID, 48)).incident, at=T0 + 4 * S)
    verifying = run_migration(migrating.incident, "wl-1", start=5)
    assert verifying.incident.state is IncidentState.VERIFYING
    adopted = adopt_workloads(verifying.incident, workload_ids=["wl-late"], at=T0 + 10 * S)
    assert adopted.incident.state is IncidentState.MIGRATING
    assert adopted.incident.recovered_at is None
    assert [c.workload_id for c in adopted.commands if isinstance(c, MigrateWorkload)] == ["wl-late"]


def test_known_workloads_and_closed_or_early_incidents_adopt_nothing(catalog: FaultCatalog) -> None:
    fresh = incident(catalog, FaultKind.XID, 48)
    assert adopt_workloads(fresh, workload_ids=["wl-late"], at=T0).ignored  # detected: not draining yet
    draining = diagnosed(fresh).incident
    assert adopt_workloads(draining, workload_ids=["wl-1"], at=T0).ignored  # already known
