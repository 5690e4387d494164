"""Every lifecycle event the scheduler sends on carries the host's own time of the fact, not the time the
scheduler got round to the agent's report (it may have been down meanwhile)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, TypedDict

from libs.common.events.agent import MigrationStepV1, WorkloadExitedV1, WorkloadStartedV1
from libs.common.events.scheduler import AllocationItem, WorkloadEndedV1, WorkloadPlacedV1, WorkloadRunningV1
from libs.common.testing import handler_context
from services.scheduler.adapters.unit_of_work_fake import FakeSchedulerUnitOfWork
from services.scheduler.service.handlers import (
    SchedulerDeps,
    on_migration_step,
    on_workload_exited,
    on_workload_started,
)
from services.telemetry.adapters.fleetfile import parse_fleet
from services.telemetry.adapters.sim import SimFleet
from services.telemetry.adapters.sim.ids import gpu_uuid
from services.telemetry.service.agent.placements import PlacementBook
from services.telemetry.service.agent.runner import SimWorkloadRunner


class _Ids(TypedDict):
    """Which report: the fields every node agent report about a workload carries."""

    workload_id: str
    tenant_id: str
    placement_id: str
    node: str


T0 = datetime(2025, 3, 14, 9, 30, tzinfo=UTC)
DEPS = SchedulerDeps(half_life=timedelta(days=7))
IDS: _Ids = {"workload_id": "w1", "tenant_id": "acme", "placement_id": "p1", "node": "n1"}
LATE = T0 + timedelta(minutes=40)  # when the agent's report is handled: after an outage
_FLEET = "nodes: [{hostname: n1, gpus: [{model: L4, count: 1}]}]"


async def placed(uow: FakeSchedulerUnitOfWork) -> None:
    """Workload w1 of acme placed as p1 on g1 (8 units) an hour before T0, not started yet."""
    row: dict[str, Any] = {
        "workload_id": "w1",
        "tenant_id": "acme",
        "kind": "job",
        "spec": {"image": "pytorch:2.3", "gpus": 1},
        "urgency": 0.5,
        "preemptible": False,
        "tags": {},
        "submitted_at": T0 - timedelta(hours=2),
        "priority": 0.5,
        "traceparent": None,
    }
    placement: dict[str, Any] = {
        "placement_id": "p1",
        "workload_id": "w1",
        "tenant_id": "acme",
        "node": "n1",
        "grants": [{"gpu": "g1", "node": "n1", "slot": "0", "units": 8, "kind": "whole"}],
        "gpus": 1,
        "units_milli": 8000,
        "models": ["A100-80GB"],
        "priority": 0.5,
        "preemptible": False,
        "ends_at": None,
        "placed_at": T0 - timedelta(hours=1),
    }
    async with uow:
        await uow.workloads.submit(row=row, outbox=[])
        await uow.workloads.insert_placement(row=placement, slots=[("g1", "0")])
        await uow.workloads.set_state("w1", state="placed", placement_id="p1", priority=0.5)
        await uow.commit()


def _running(uow: FakeSchedulerUnitOfWork) -> WorkloadRunningV1:
    [event] = [e for e in uow.events if isinstance(e, WorkloadRunningV1)]
    return event


def _ended(uow: FakeSchedulerUnitOfWork) -> WorkloadEndedV1:
    [event] = [e for e in uow.events if isinstance(e, WorkloadEndedV1)]
    return event


async def test_running_carries_the_agents_time_of_the_start_not_the_time_it_was_handled() -> None:
    uow = FakeSchedulerUnitOfWork()
    await placed(uow)
    event = WorkloadStartedV1(**IDS, at=T0)

    async with uow:
        await on_workload_started(event, handler_context(event, uow=uow, deps=DEPS, time=LATE))
        await uow.commit()

    assert _running(uow).started_at == T0 == uow.workloads.placements["p1"].started_at


async def test_an_agent_without_its_own_stamp_gives_its_envelope_time_written_at_the_fact() -> None:
    uow = FakeSchedulerUnitOfWork()
    await placed(uow)
    event = WorkloadStartedV1(**IDS)

    async with uow:
        await on_workload_started(event, handler_context(event, uow=uow, deps=DEPS, time=T0))
        await uow.commit()

    assert _running(uow).started_at == T0


async def test_an_exit_handled_after_an_outage_ends_at_the_hosts_exit_the_same_instant_it_stores() -> None:
    uow = FakeSchedulerUnitOfWork()
    await placed(uow)
    start = WorkloadStartedV1(**IDS, at=T0)
    exited_at = T0 + timedelta(minutes=5, milliseconds=27)
    exited = WorkloadExitedV1(**IDS, outcome="completed", at=exited_at)

    async with uow:
        await on_workload_started(start, handler_context(start, uow=uow, deps=DEPS, time=T0))
        await on_workload_exited(exited, handler_context(exited, uow=uow, deps=DEPS, time=LATE))
        await uow.commit()

    assert _ended(uow).ended_at == exited_at
    assert uow.workloads.workloads["w1"].ended_at == exited_at  # the scheduler's ended_at: one instant
    assert uow.workloads.placements["p1"].ended_at == exited_at


async def test_the_last_migration_step_gives_its_own_instant_as_the_new_placements_start() -> None:
    uow = FakeSchedulerUnitOfWork()
    await placed(uow)
    resumed = T0 + timedelta(seconds=31)
    step = MigrationStepV1(**IDS, phase="running", percent=100, at=resumed)

    async with uow:
        await on_migration_step(step, handler_context(step, uow=uow, deps=DEPS, time=LATE))
        await uow.commit()

    assert _running(uow).started_at == resumed == uow.workloads.placements["p1"].started_at


def test_the_agent_stamps_each_report_with_the_runners_instant_not_the_poll_that_found_it() -> None:
    """Where the chain starts: a job's exit found by a poll long after still says when it exited."""
    fleet = SimFleet(spec=parse_fleet(_FLEET), start=T0)
    gpu = gpu_uuid(hostname="n1", index=0)
    book = PlacementBook(runner=SimWorkloadRunner(fleet=fleet), gpus=frozenset({gpu}))
    placed = WorkloadPlacedV1(
        **IDS,
        allocations=[AllocationItem(gpu_uuid=gpu, units=Decimal(8), model="L4")],
        kind="job",
        duration_s=10.0,
    )
    book.apply(placed, at=T0)
    polled = [
        (r, T0 + timedelta(seconds=s))
        for s in range(0, 300, 7)
        for r in book.reports(now=T0 + timedelta(seconds=s))
    ]

    [(start, start_poll)] = [(r, t) for r, t in polled if isinstance(r, WorkloadStartedV1)]
    [(end, end_poll)] = [(r, t) for r, t in polled if isinstance(r, WorkloadExitedV1)]
    assert start.at is not None
    assert end.at is not None
    assert end.at - start.at == timedelta(seconds=10)  # the run's own length, not a count of 7 s polls
    assert end.at <= end_poll
    assert start.at <= start_poll
