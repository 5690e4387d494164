"""The run and migration handlers run on the scheduler's fake unit of work, without a database."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from libs.common.events.agent import MigrationStepV1, WorkloadExitedV1, WorkloadStartedV1
from libs.common.events.recovery import MigrationRequestedV1
from libs.common.events.scheduler import WorkloadEndedV1, WorkloadRunningV1
from libs.common.testing import handler_context
from services.scheduler.adapters.unit_of_work_fake import FakeSchedulerUnitOfWork
from services.scheduler.service.handlers import (
    SchedulerDeps,
    on_migration_requested,
    on_migration_step,
    on_workload_exited,
    on_workload_started,
)

T0 = datetime(2025, 3, 14, 9, 30, tzinfo=UTC)
DEPS = SchedulerDeps(half_life=timedelta(days=7))
TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


async def placed(uow: FakeSchedulerUnitOfWork, *, wid: str = "w1", pid: str = "p1") -> None:
    """A committed workload of acme placed as ``pid`` on g1 (8 units) three hours before T0."""
    row: dict[str, Any] = {
        "workload_id": wid,
        "tenant_id": "acme",
        "kind": "job",
        "spec": {"image": "pytorch:2.3", "gpus": 1},
        "urgency": 0.5,
        "preemptible": False,
        "tags": {},
        "submitted_at": T0 - timedelta(hours=4),
        "priority": 0.5,
        "traceparent": TRACE,
    }
    placement: dict[str, Any] = {
        "placement_id": pid,
        "workload_id": wid,
        "tenant_id": "acme",
        "node": "n1",
        "grants": [{"gpu": "g1", "node": "n1", "slot": "0", "units": 8, "kind": "whole"}],
        "gpus": 1,
        "units_milli": 8000,
        "models": ["A100-80GB"],
        "priority": 0.75,
        "preemptible": False,
        "ends_at": None,
        "placed_at": T0 - timedelta(hours=3),
    }
    async with uow:
        await uow.workloads.submit(row=row, outbox=[])
        await uow.workloads.insert_placement(row=placement, slots=[("g1", "0")])
        await uow.workloads.set_state(wid, state="placed", placement_id=pid, priority=0.75)
        await uow.commit()


def _started(pid: str = "p1") -> WorkloadStartedV1:
    return WorkloadStartedV1(workload_id="w1", tenant_id="acme", placement_id=pid, node="n1")


def _exited(pid: str = "p1") -> WorkloadExitedV1:
    return WorkloadExitedV1(
        workload_id="w1", tenant_id="acme", placement_id=pid, node="n1", outcome="completed", reason="exit 0"
    )


def _migration(wid: str = "w1") -> MigrationRequestedV1:
    return MigrationRequestedV1(incident_id="inc-1", workload_id=wid, tenant_id="acme", away_from_gpu="g1")


async def _deliver_start(uow: FakeSchedulerUnitOfWork, *, at: datetime) -> None:
    event = _started()
    async with uow:
        await on_workload_started(event, handler_context(event, uow=uow, deps=DEPS, time=at))
        await uow.commit()


async def test_a_start_on_the_current_placement_marks_the_workload_running_and_emits_running() -> None:
    uow = FakeSchedulerUnitOfWork()
    await placed(uow)

    await _deliver_start(uow, at=T0)

    assert uow.workloads.workloads["w1"].state == "running"
    assert uow.workloads.placements["p1"].started_at == T0
    assert uow.events == [
        WorkloadRunningV1(workload_id="w1", tenant_id="acme", placement_id="p1", node="n1", started_at=T0)
    ]
    assert [tenant for _event, tenant in uow.committed] == ["acme"]


async def test_a_start_on_an_old_placement_changes_nothing_and_emits_nothing() -> None:
    uow = FakeSchedulerUnitOfWork()
    await placed(uow)
    event = _started(pid="p-old")

    async with uow:
        await on_workload_started(event, handler_context(event, uow=uow, deps=DEPS, time=T0))
        await uow.commit()

    assert uow.workloads.workloads["w1"].state == "placed"
    assert uow.workloads.placements["p1"].started_at is None
    assert uow.events == []


async def test_the_last_migration_step_starts_the_workload_on_its_new_placement() -> None:
    uow = FakeSchedulerUnitOfWork()
    await placed(uow)
    step = MigrationStepV1(
        workload_id="w1", tenant_id="acme", placement_id="p1", node="n1", phase="running", percent=100
    )

    async with uow:
        await on_migration_step(step, handler_context(step, uow=uow, deps=DEPS, time=T0))
        await uow.commit()

    assert uow.workloads.workloads["w1"].state == "running"
    assert uow.events == [
        WorkloadRunningV1(workload_id="w1", tenant_id="acme", placement_id="p1", node="n1", started_at=T0)
    ]


async def test_an_exit_ends_the_run_frees_its_slots_accrues_the_tenants_usage_and_emits_ended() -> None:
    uow = FakeSchedulerUnitOfWork()
    uow.fleet.usage["acme"] = (10.0, T0 - timedelta(days=7))  # one half-life old: 5.0 at T0
    await placed(uow)
    await _deliver_start(uow, at=T0 - timedelta(hours=2))
    wakes = uow.workloads.wakes
    event = _exited()

    async with uow:
        await on_workload_exited(event, handler_context(event, uow=uow, deps=DEPS, time=T0))
        await uow.commit()

    ended = uow.workloads.workloads["w1"]
    assert (ended.state, ended.outcome, ended.reason, ended.ended_at) == (
        "completed",
        "completed",
        "exit 0",
        T0,
    )
    assert uow.workloads.placements["p1"].ended_at == T0
    assert uow.workloads.held == {}
    assert uow.fleet.usage == {"acme": (5.0 + 2 * 8.0, T0)}  # 2 hours on 8 units
    assert uow.events[-1] == WorkloadEndedV1(
        workload_id="w1",
        tenant_id="acme",
        placement_id="p1",
        outcome="completed",
        reason="exit 0",
        ended_at=T0,
    )
    assert uow.workloads.wakes == wakes + 1


async def test_an_exit_of_a_run_never_started_counts_from_its_placement_for_a_tenant_without_usage() -> None:
    uow = FakeSchedulerUnitOfWork()
    await placed(uow)
    event = _exited()

    async with uow:
        await on_workload_exited(event, handler_context(event, uow=uow, deps=DEPS, time=T0))
        await uow.commit()

    assert uow.fleet.usage == {"acme": (3 * 8.0, T0)}  # placed three hours before, on 8 units
    assert [type(e) for e in uow.events] == [WorkloadEndedV1]


async def test_an_exit_about_an_old_placement_changes_nothing_and_emits_nothing() -> None:
    uow = FakeSchedulerUnitOfWork()
    await placed(uow)
    event = _exited(pid="p-old")

    async with uow:
        await on_workload_exited(event, handler_context(event, uow=uow, deps=DEPS, time=T0))
        await uow.commit()

    assert uow.workloads.workloads["w1"].state == "placed"
    assert uow.workloads.held == {("g1", "0"): "p1"}
    assert uow.fleet.usage == {}
    assert uow.events == []


async def test_an_exit_delivered_without_a_commit_keeps_nothing() -> None:
    uow = FakeSchedulerUnitOfWork()
    uow.fleet.usage["acme"] = (10.0, T0 - timedelta(days=7))
    await placed(uow)
    await _deliver_start(uow, at=T0 - timedelta(hours=2))
    workload, placement = uow.workloads.workloads["w1"], uow.workloads.placements["p1"]
    events, wakes = list(uow.events), uow.workloads.wakes
    event = _exited()

    async with uow:  # the delivery fails before its commit
        await on_workload_exited(event, handler_context(event, uow=uow, deps=DEPS, time=T0))

    assert uow.workloads.workloads["w1"] == workload
    assert uow.workloads.placements["p1"] == placement
    assert uow.workloads.held == {("g1", "0"): "p1"}
    assert uow.fleet.usage == {"acme": (10.0, T0 - timedelta(days=7))}
    assert (uow.events, uow.workloads.wakes) == (events, wakes)


async def test_a_migration_request_pins_the_priority_avoids_the_gpu_frees_slots_and_wakes_the_placer() -> (
    None
):
    uow = FakeSchedulerUnitOfWork()
    await placed(uow)
    await _deliver_start(uow, at=T0 - timedelta(hours=2))
    before, wakes = uow.workloads.workloads["w1"], uow.workloads.wakes
    event = _migration()

    async with uow:
        await on_migration_requested(event, handler_context(event, uow=uow, deps=DEPS, time=T0))
        await uow.commit()

    assert uow.workloads.workloads["w1"] == replace(
        before, state="migrating", pinned_priority=0.75, avoid_gpus=["g1"]
    )
    assert uow.workloads.placements["p1"].migrating
    assert uow.workloads.placements["p1"].ended_at is None  # ended when the workload is re-placed
    assert uow.workloads.held == {}
    assert uow.workloads.wakes == wakes + 1


async def test_a_migration_request_for_a_workload_that_is_not_placed_changes_nothing() -> None:
    uow = FakeSchedulerUnitOfWork()
    await placed(uow)
    async with uow:
        await uow.workloads.end_placement("p1", outcome="cancelled", at=T0)
        await uow.workloads.end_workload("w1", state="cancelled", outcome="cancelled", reason="", at=T0)
        await uow.commit()
    before, wakes = uow.workloads.workloads["w1"], uow.workloads.wakes

    async with uow:
        for event in (_migration(), _migration("w-unknown")):
            await on_migration_requested(event, handler_context(event, uow=uow, deps=DEPS, time=T0))
        await uow.commit()

    assert uow.workloads.workloads == {"w1": before}
    assert uow.workloads.wakes == wakes
