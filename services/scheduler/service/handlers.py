"""Consumed events: inventory's GPUs, the node agent's starts and exits, recovery's migrations, billing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from libs.common.bus.handlers import HandlerContext, Handlers
from libs.common.db.uow import UnitOfWork
from libs.common.events.agent import MigrationStepV1, WorkloadExitedV1, WorkloadStartedV1
from libs.common.events.billing import BudgetThresholdCrossedV1, UsageDecayedV1
from libs.common.events.inventory import GpuHealthChangedV1, GpuPartitionsChangedV1, GpuRegisteredV1
from libs.common.events.recovery import MigrationRequestedV1
from libs.common.events.scheduler import WorkloadEndedV1, WorkloadRunningV1
from services.scheduler.adapters.fleet_store import FleetStore
from services.scheduler.adapters.workload_store import WorkloadStore
from services.scheduler.domain.priority import DecayedUsage, accrue
from services.scheduler.service.trace import workload_trace

__all__ = ["FleetWrites", "SchedulerDeps", "handlers"]


class FleetWrites(Protocol):
    """The fleet and fair-share writes the handlers make (FleetStore; FakeFleetStore in unit tests)."""

    async def upsert_gpu(self, *, row: dict[str, Any]) -> None: ...

    async def set_partitions(
        self, gpu_uuid: str, *, mig_enabled: bool, ratio: int, partitions: list[dict[str, Any]]
    ) -> None: ...

    async def set_health(self, gpu_uuid: str, *, health: str) -> None: ...

    async def set_usage(self, tenant: str, *, value: float, as_of: datetime) -> None: ...

    async def add_stop(self, *, tenant: str, project: str, month: str, reason: str) -> None: ...


def _sql_fleet(uow: UnitOfWork) -> FleetWrites:
    return FleetStore(uow.conn)


@dataclass(frozen=True, slots=True, kw_only=True)
class SchedulerDeps:
    """What the handlers need besides the unit of work: the fair-share half-life, the fleet store."""

    half_life: timedelta
    fleet: Callable[[UnitOfWork], FleetWrites] = _sql_fleet


def _partitions(event: GpuRegisteredV1 | GpuPartitionsChangedV1) -> list[dict[str, object]]:
    return [p.model_dump(mode="json") for p in event.partitions]


async def on_gpu_registered(event: GpuRegisteredV1, ctx: HandlerContext[SchedulerDeps]) -> None:
    row = {
        "gpu_uuid": event.gpu_uuid,
        "node": event.node,
        "model": event.model,
        "memory_bytes": event.memory_bytes,
        "units": event.units,
        "health": event.health,
        "labels": event.labels,
        "mig_enabled": event.mig_enabled,
        "time_slice_ratio": event.time_slice_ratio,
        "partitions": _partitions(event),
    }
    await ctx.deps.fleet(ctx.uow).upsert_gpu(row=row)
    await WorkloadStore(ctx.uow.conn).wake_placer()


async def on_gpu_partitions_changed(
    event: GpuPartitionsChangedV1, ctx: HandlerContext[SchedulerDeps]
) -> None:
    await ctx.deps.fleet(ctx.uow).set_partitions(
        event.gpu_uuid,
        mig_enabled=event.mig_enabled,
        ratio=event.time_slice_ratio,
        partitions=_partitions(event),
    )
    await WorkloadStore(ctx.uow.conn).wake_placer()


async def on_gpu_health_changed(event: GpuHealthChangedV1, ctx: HandlerContext[SchedulerDeps]) -> None:
    await ctx.deps.fleet(ctx.uow).set_health(event.gpu_uuid, health=event.health)
    await WorkloadStore(ctx.uow.conn).wake_placer()


async def on_workload_started(event: WorkloadStartedV1, ctx: HandlerContext[SchedulerDeps]) -> None:
    # Only the current placement counts: a late report about an old one changes nothing.
    row = await WorkloadStore(ctx.uow.conn).start_run(
        event.workload_id, placement_id=event.placement_id, at=ctx.envelope.time
    )
    if row is None:
        return
    running = WorkloadRunningV1(
        workload_id=event.workload_id,
        tenant_id=row["tenant_id"],
        placement_id=event.placement_id,
        node=event.node,
    )
    with workload_trace(
        workload_id=event.workload_id, traceparent=row["traceparent"], name="scheduler.running"
    ):
        await ctx.uow.emit(running, tenant=row["tenant_id"])


async def on_migration_step(event: MigrationStepV1, ctx: HandlerContext[SchedulerDeps]) -> None:
    # A migrated workload is not started again: the agent's last step says it runs on the new placement.
    if event.phase != "running":
        return
    started = WorkloadStartedV1(
        workload_id=event.workload_id,
        tenant_id=event.tenant_id,
        placement_id=event.placement_id,
        node=event.node,
    )
    await on_workload_started(started, ctx)


async def on_workload_exited(event: WorkloadExitedV1, ctx: HandlerContext[SchedulerDeps]) -> None:
    store, at = WorkloadStore(ctx.uow.conn), ctx.envelope.time
    ended = await store.end_run(
        event.workload_id,
        placement_id=event.placement_id,
        outcome=event.outcome,
        reason=event.reason,
        at=at,
    )
    if ended is None:
        return
    tenant = ended["tenant_id"]
    hours = max((at - (ended["started_at"] or ended["placed_at"])).total_seconds(), 0.0) / 3600
    acc = (
        DecayedUsage(float(ended["decayed_unit_hours"]), ended["as_of"])
        if ended["as_of"] is not None
        else DecayedUsage(0.0, at)
    )
    after = accrue(acc, amount=hours * ended["units_milli"] / 1000, at=at, half_life=ctx.deps.half_life)
    await ctx.deps.fleet(ctx.uow).set_usage(tenant, value=after.value, as_of=after.as_of)
    ended_event = WorkloadEndedV1(
        workload_id=event.workload_id,
        tenant_id=tenant,
        placement_id=event.placement_id,
        outcome=event.outcome,
        reason=event.reason,
    )
    with workload_trace(
        workload_id=event.workload_id, traceparent=ended["traceparent"], name="scheduler.ended"
    ):
        await ctx.uow.emit(ended_event, tenant=tenant)


async def on_migration_requested(event: MigrationRequestedV1, ctx: HandlerContext[SchedulerDeps]) -> None:
    store = WorkloadStore(ctx.uow.conn)
    row = await store.lock_workload(event.workload_id)
    if row is None or row["state"] not in ("placed", "running") or row["placement_id"] is None:
        return
    placement = await store.placement(row["placement_id"])
    assert placement is not None
    await store.start_migration(
        event.workload_id, priority=float(placement["priority"]), avoid_gpu=event.away_from_gpu
    )
    await store.mark_migrating(row["placement_id"])
    await store.wake_placer()


async def on_usage_decayed(event: UsageDecayedV1, ctx: HandlerContext[SchedulerDeps]) -> None:
    # Billing's ledger is the authority on usage: its figure replaces the local running estimate.
    await ctx.deps.fleet(ctx.uow).set_usage(
        event.tenant_id, value=float(event.decayed_unit_hours), as_of=ctx.envelope.time
    )


async def on_budget_threshold_crossed(
    event: BudgetThresholdCrossedV1, ctx: HandlerContext[SchedulerDeps]
) -> None:
    if not event.hard_stop:
        return
    reason = (
        f"project {event.project!r} reached {event.threshold_pct}% of its {event.month} budget (hard stop)"
    )
    await ctx.deps.fleet(ctx.uow).add_stop(
        tenant=event.tenant_id, project=event.project, month=event.month, reason=reason
    )


def handlers(deps: SchedulerDeps) -> Handlers[SchedulerDeps]:
    """The main consumer's handlers: the fleet, runs and migrations, and billing's usage and stops."""
    return (
        Handlers(deps)
        .on(GpuRegisteredV1, on_gpu_registered)
        .on(GpuPartitionsChangedV1, on_gpu_partitions_changed)
        .on(GpuHealthChangedV1, on_gpu_health_changed)
        .on(WorkloadStartedV1, on_workload_started)
        .on(MigrationStepV1, on_migration_step)
        .on(WorkloadExitedV1, on_workload_exited)
        .on(MigrationRequestedV1, on_migration_requested)
        .on(UsageDecayedV1, on_usage_decayed)
        .on(BudgetThresholdCrossedV1, on_budget_threshold_crossed)
    )
