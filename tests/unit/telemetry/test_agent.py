"""The agent's fleet files, placement book and simulated workload runner (no IO, time passed in)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from libs.common.events.agent import MigrationStepV1, WorkloadExitedV1, WorkloadStartedV1
from libs.common.events.scheduler import (
    AllocationItem,
    WorkloadEndedV1,
    WorkloadMigratingV1,
    WorkloadPlacedV1,
)
from services.telemetry.adapters.fleetfile import FleetFileError, parse_fleet
from services.telemetry.adapters.sim import SimFleet
from services.telemetry.adapters.sim.faults import FaultKind
from services.telemetry.adapters.sim.ids import gpu_uuid
from services.telemetry.service.agent.placements import PlacementBook
from services.telemetry.service.agent.runner import SimWorkloadRunner

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
FLEET = """
nodes:
  - hostname: gpu-a-01
    labels: {zone: eu-west-1a, region: eu-west-1, pool: training, edge: false}
    gpus:
      - {model: H100-80GB-SXM, count: 2, mig: ["3g.40gb@4"]}
      - {model: L4, count: 1}
"""


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_fleet_file_gpus_get_inventorys_uuids_and_catalog_names_map_to_simulator_models() -> None:
    spec = parse_fleet(FLEET)
    fleet = SimFleet(spec=spec, start=T0)
    uuids = [g.uuid for g in fleet.discovery(hostname="gpu-a-01").gpus]
    inventory_namespace = uuid.UUID("6f1c2a4e-0b7d-4c39-9a55-3f0e8f0c1d2b")
    assert uuids == [f"GPU-{uuid.uuid5(inventory_namespace, f'gpu-a-01/{i}')}" for i in range(3)]
    node = spec.nodes[0]
    assert node.labels["edge"] == "false"
    assert [(g.model, g.catalog_model, g.mig) for g in node.gpus] == [
        ("H100", "H100-80GB-SXM", ("3g.40gb@4",)),
        ("L4", "L4", ()),
    ]


def test_fleet_file_with_an_unknown_model_names_the_node() -> None:
    with pytest.raises(FleetFileError, match="node n1: no simulator model for 'Z9'"):
        parse_fleet("nodes: [{hostname: n1, gpus: [{model: Z9}]}]")


def _book() -> tuple[PlacementBook, list[str]]:
    fleet = SimFleet(spec=parse_fleet(FLEET), start=T0)
    gpus = [gpu_uuid(hostname="gpu-a-01", index=i) for i in range(3)]
    return PlacementBook(runner=SimWorkloadRunner(fleet=fleet), gpus=frozenset(gpus)), gpus


def _placed(gpus: list[str], *, placement: str = "p1", duration_s: float | None = 10.0) -> WorkloadPlacedV1:
    return WorkloadPlacedV1(
        workload_id="w1",
        tenant_id="acme",
        placement_id=placement,
        node="gpu-a-01",
        allocations=[AllocationItem(gpu_uuid=g, units=Decimal(8), model="H100") for g in gpus],
        kind="job",
        profile="interactive",
        duration_s=duration_s,
    )


def test_two_gpu_job_reports_started_once_then_exits_completed_after_its_duration() -> None:
    book, gpus = _book()
    book.apply(_placed(gpus[:2]), at=T0)
    book.apply(_placed(gpus[:2]), at=T0)  # redelivered: nothing changes
    assert book.allocations() == {gpus[0]: ("w1", "acme"), gpus[1]: ("w1", "acme")}
    reports = [r for s in range(0, 20) for r in book.reports(now=at(s))]
    assert [type(r) for r in reports] == [WorkloadStartedV1, WorkloadExitedV1]
    exited = reports[1]
    assert isinstance(exited, WorkloadExitedV1)
    assert (exited.placement_id, exited.outcome) == ("p1", "completed")
    assert book.allocations() == {}


def test_ended_placement_is_released_without_reports() -> None:
    book, gpus = _book()
    book.apply(_placed(gpus[:1]), at=T0)
    ended = WorkloadEndedV1(workload_id="w1", tenant_id="acme", placement_id="p1", outcome="cancelled")
    book.apply(ended, at=T0)
    assert [r for s in range(0, 20) for r in book.reports(now=at(s))] == []


def test_a_redelivered_migration_leaves_nothing_held_once_the_workload_ends() -> None:
    book, gpus = _book()
    move = WorkloadMigratingV1(
        workload_id="w1", tenant_id="acme", from_placement_id="p1", to_placement_id="p2"
    )
    book.apply(_placed(gpus[:1], duration_s=None), at=T0)
    for _ in range(2):  # the relay published the move's batch twice (at least once)
        book.apply(move, at=at(11))
        book.apply(_placed(gpus[1:2], placement="p2", duration_s=None), at=at(11))
    assert book.allocations() == {gpus[1]: ("w1", "acme")}
    book.apply(
        WorkloadEndedV1(workload_id="w1", tenant_id="acme", placement_id="p2", outcome="completed"), at=at(20)
    )
    assert book.allocations() == {}
    assert not book.holds("w1")  # nothing left for the agent's checkpoint to keep


def test_migration_reports_checkpoint_transfer_restore_progress_then_running() -> None:
    book, gpus = _book()
    book.apply(_placed(gpus[:1], duration_s=None), at=T0)
    assert [type(r) for r in book.reports(now=at(10))] == [WorkloadStartedV1]
    move = WorkloadMigratingV1(
        workload_id="w1", tenant_id="acme", from_placement_id="p1", to_placement_id="p2"
    )
    book.apply(move, at=at(11))
    book.apply(_placed(gpus[1:2], placement="p2", duration_s=None), at=at(11))
    steps = [r for s in range(12, 200) for r in book.reports(now=at(s))]
    assert all(isinstance(r, MigrationStepV1) and r.placement_id == "p2" for r in steps)
    phases = [r.phase for r in steps if isinstance(r, MigrationStepV1)]
    assert phases[0] == "checkpoint"
    assert phases.index("transfer") < phases.index("restore") < phases.index("running")
    assert steps[-1] == steps[-1].model_copy(update={"phase": "running", "percent": 100})
    assert book.allocations() == {gpus[1]: ("w1", "acme")}


def _xid_79_kills_w1(gpus: list[str]) -> tuple[PlacementBook, SimFleet, list[object]]:
    fleet = SimFleet(spec=parse_fleet(FLEET), start=T0)
    book = PlacementBook(runner=SimWorkloadRunner(fleet=fleet), gpus=frozenset(gpus))
    book.apply(_placed(gpus[:1], duration_s=None), at=T0)
    reports: list[object] = list(book.reports(now=at(10)))
    fleet.inject_fault(gpu_uuid=gpus[0], fault=FaultKind.XID, xid=79, now=at(11))
    reports += [r for s in range(11, 30) for r in book.reports(now=at(s))]
    return book, fleet, reports


def test_a_workload_killed_by_an_xid_is_interrupted_not_failed_and_migration_restores_it_elsewhere() -> None:
    gpus = [gpu_uuid(hostname="gpu-a-01", index=i) for i in range(3)]
    book, _fleet, reports = _xid_79_kills_w1(gpus)
    # Recovery owns XID-killed work: no exit report, so the scheduler keeps it for the migration.
    assert [type(r) for r in reports] == [WorkloadStartedV1]
    move = WorkloadMigratingV1(
        workload_id="w1", tenant_id="acme", from_placement_id="p1", to_placement_id="p2"
    )
    book.apply(move, at=at(30))
    book.apply(_placed(gpus[1:2], placement="p2", duration_s=None), at=at(30))
    steps = [r for s in range(31, 200) for r in book.reports(now=at(s))]
    assert all(isinstance(r, MigrationStepV1) and r.placement_id == "p2" for r in steps)
    phases = [r.phase for r in steps if isinstance(r, MigrationStepV1)]
    assert phases[0] == "transfer"  # nothing to checkpoint on a dead GPU: the last checkpoint moves
    assert phases.index("restore") < phases.index("running")
    percents = [r.percent for r in steps if isinstance(r, MigrationStepV1)]
    assert percents == sorted(percents)
    assert percents[-1] == 100
