"""Consumed events: inventory's GPUs, the node agent's starts and exits, recovery's migrations, billing."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from libs.common.bus.consumer import Handler, HandlerContext
from libs.common.events import Event
from libs.common.events.agent import MigrationStepV1, WorkloadExitedV1, WorkloadStartedV1
from libs.common.events.billing import BudgetThresholdCrossedV1, UsageDecayedV1
from libs.common.events.inventory import GpuHealthChangedV1, GpuPartitionsChangedV1, GpuRegisteredV1
from libs.common.events.recovery import MigrationRequestedV1
from libs.common.events.scheduler import WorkloadEndedV1, WorkloadRunningV1
from services.scheduler.priority import DecayedUsage, accrue
from services.scheduler.store import Store
from services.scheduler.store_fleet import FleetStore
from services.scheduler.trace import workload_trace

__all__ = ["HANDLERS", "make_handlers"]


def _partitions(event: GpuRegisteredV1 | GpuPartitionsChangedV1) -> list[dict[str, object]]:
    return [p.model_dump(mode="json") for p in event.partitions]


async def handle_gpu_registered(event: GpuRegisteredV1, ctx: HandlerContext) -> None:
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
    await FleetStore(ctx.uow.conn).upsert_gpu(row=row)
    await Store(ctx.uow.conn).wake_placer()


async def handle_partitions_changed(event: GpuPartitionsChangedV1, ctx: HandlerContext) -> None:
    await FleetStore(ctx.uow.conn).set_partitions(
        event.gpu_uuid,
        mig_enabled=event.mig_enabled,
        ratio=event.time_slice_ratio,
        partitions=_partitions(event),
    )
    await Store(ctx.uow.conn).wake_placer()


async def handle_health_changed(event: GpuHealthChangedV1, ctx: HandlerContext) -> None:
    await FleetStore(ctx.uow.conn).set_health(event.gpu_uuid, health=event.health)
    await Store(ctx.uow.conn).wake_placer()


async def handle_started(event: WorkloadStartedV1, ctx: HandlerContext) -> None:
    # Only the current placement counts: a late report about an old one changes nothing.
    row = await Store(ctx.uow.conn).start_run(
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


async def handle_migration_step(event: MigrationStepV1, ctx: HandlerContext) -> None:
    # A migrated workload is not started again: the agent's last step says it runs on the new placement.
    if event.phase != "running":
        return
    started = WorkloadStartedV1(
        workload_id=event.workload_id,
        tenant_id=event.tenant_id,
        placement_id=event.placement_id,
        node=event.node,
    )
    await handle_started(started, ctx)


def _exited(half_life: timedelta) -> Handler:
    async def handle_exited(event: WorkloadExitedV1, ctx: HandlerContext) -> None:
        store, at = Store(ctx.uow.conn), ctx.envelope.time
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
        after = accrue(acc, amount=hours * ended["units_milli"] / 1000, at=at, half_life=half_life)
        await FleetStore(ctx.uow.conn).set_usage(tenant, value=after.value, as_of=after.as_of)
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

    return handle_exited


async def handle_migration_requested(event: MigrationRequestedV1, ctx: HandlerContext) -> None:
    store = Store(ctx.uow.conn)
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


async def handle_usage_decayed(event: UsageDecayedV1, ctx: HandlerContext) -> None:
    # Billing's ledger is the authority on usage: its figure replaces the local running estimate.
    await FleetStore(ctx.uow.conn).set_usage(
        event.tenant_id, value=float(event.decayed_unit_hours), as_of=ctx.envelope.time
    )


async def handle_budget_crossed(event: BudgetThresholdCrossedV1, ctx: HandlerContext) -> None:
    if not event.hard_stop:
        return
    reason = (
        f"project {event.project!r} reached {event.threshold_pct}% of its {event.month} budget (hard stop)"
    )
    await FleetStore(ctx.uow.conn).add_stop(
        tenant=event.tenant_id, project=event.project, month=event.month, reason=reason
    )


def make_handlers(*, half_life: timedelta) -> Mapping[type[Event], Handler]:
    """Every handler, with the fair-share half-life bound in."""
    return {
        GpuRegisteredV1: handle_gpu_registered,
        GpuPartitionsChangedV1: handle_partitions_changed,
        GpuHealthChangedV1: handle_health_changed,
        WorkloadStartedV1: handle_started,
        MigrationStepV1: handle_migration_step,
        WorkloadExitedV1: _exited(half_life),
        MigrationRequestedV1: handle_migration_requested,
        UsageDecayedV1: handle_usage_decayed,
        BudgetThresholdCrossedV1: handle_budget_crossed,
    }


HANDLERS: Mapping[type[Event], Handler] = make_handlers(half_life=timedelta(days=7))
