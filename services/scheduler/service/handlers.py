"""Consumed events: inventory's GPUs, the node agent's starts and exits, recovery's migrations, billing."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypeAlias

from libs.common.bus.handlers import HandlerContext, Handlers
from libs.common.events.agent import MigrationStepV1, WorkloadExitedV1, WorkloadStartedV1
from libs.common.events.billing import BudgetThresholdCrossedV1, UsageDecayedV1
from libs.common.events.inventory import GpuHealthChangedV1, GpuPartitionsChangedV1, GpuRegisteredV1
from libs.common.events.recovery import MigrationRequestedV1
from libs.common.events.scheduler import WorkloadEndedV1, WorkloadReallocatedV1, WorkloadRunningV1
from services.scheduler.adapters.unit_of_work import PostgresSchedulerUnitOfWork
from services.scheduler.domain.cluster import GpuView, Grant
from services.scheduler.domain.priority import DecayedUsage, accrue
from services.scheduler.domain.reallocation import Regrant, follow_devices
from services.scheduler.domain.rows import gpu_view, grant_of
from services.scheduler.domain.stored import RunExit, RunHost, StoredPlacement
from services.scheduler.service.commit import allocation_item
from services.scheduler.service.trace import workload_trace
from services.scheduler.service.unit_of_work import SchedulerUnitOfWork

__all__ = ["Context", "SchedulerDeps", "handlers"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class SchedulerDeps:
    """What the handlers need besides the unit of work: the fair-share half-life."""

    half_life: timedelta


#: What every handler of the scheduler gets: its deps and the scheduler's unit of work.
Context: TypeAlias = HandlerContext[SchedulerDeps, SchedulerUnitOfWork]


def _partitions(event: GpuRegisteredV1 | GpuPartitionsChangedV1) -> list[dict[str, object]]:
    return [p.model_dump(mode="json") for p in event.partitions]


async def on_gpu_registered(event: GpuRegisteredV1, ctx: Context) -> None:
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
    await ctx.uow.fleet.upsert_gpu(row=row)
    await ctx.uow.fleet.wake_placer()


async def on_gpu_partitions_changed(event: GpuPartitionsChangedV1, ctx: Context) -> None:
    await ctx.uow.fleet.set_partitions(
        event.gpu_uuid,
        mig_enabled=event.mig_enabled,
        ratio=event.time_slice_ratio,
        partitions=_partitions(event),
    )
    await ctx.uow.fleet.wake_placer()


async def on_gpu_health_changed(event: GpuHealthChangedV1, ctx: Context) -> None:
    await ctx.uow.fleet.set_health(event.gpu_uuid, health=event.health)
    await ctx.uow.fleet.wake_placer()


def _host_time(event: WorkloadStartedV1 | WorkloadExitedV1 | MigrationStepV1, ctx: Context) -> datetime:
    """When the host saw it happen: the agent's own stamp, else its envelope's (written at the fact);
    never when this handler got round to it (the scheduler may have been down meanwhile)."""
    return event.at or ctx.envelope.time


async def on_workload_started(event: WorkloadStartedV1, ctx: Context) -> None:
    # Only the current placement counts: a late report about an old one changes nothing.
    at = _host_time(event, ctx)
    host = RunHost(
        pid=event.pid, container_id=event.container_id, runner=event.runner, notes=tuple(event.notes)
    )
    row = await ctx.uow.workloads.start_run(
        event.workload_id, placement_id=event.placement_id, at=at, host=host
    )
    if row is not None:
        running = WorkloadRunningV1(
            workload_id=event.workload_id,
            tenant_id=row.tenant_id,
            placement_id=event.placement_id,
            node=event.node,
            started_at=at,
        )
        with workload_trace(
            workload_id=event.workload_id, traceparent=row.traceparent, name="scheduler.running"
        ):
            await ctx.uow.emit(running, tenant=row.tenant_id, time=at)
    if event.gpu_uuids is not None:
        await _follow_host_devices(event, event.gpu_uuids, ctx, at=at)


async def _follow_host_devices(
    event: WorkloadStartedV1, reported: Sequence[str], ctx: Context, *, at: datetime
) -> None:
    """The running placement takes the devices its host gave it (a repeat of the same devices, or a
    report about an old placement, changes nothing); a placement it swaps with gets those it gave up."""
    store = ctx.uow.workloads
    workload = await store.lock_workload(event.workload_id)
    if workload is None or workload.state != "running" or workload.placement_id != event.placement_id:
        return
    live = {p.placement_id: p for p in await store.live_placements_on(event.node)}
    mine = live.pop(event.placement_id, None)
    if mine is None:
        log.warning(
            "placement %s is not live on %s: its devices stay as placed", event.placement_id, event.node
        )
        return
    gpus = {g.gpu_uuid: gpu_view(g) for g in await ctx.uow.fleet.node_gpus(mine.node)}
    decided = follow_devices(
        placement_id=mine.placement_id,
        node=mine.node,
        grants=[grant_of(g) for g in mine.grants],
        reported=reported,
        gpus=gpus,
        others={pid: [grant_of(g) for g in p.grants] for pid, p in live.items()},
    )
    if decided.refused is not None:
        log.warning("placement %s keeps its devices: %s", mine.placement_id, decided.refused)
        return
    if not decided.changes:
        return
    await store.regrant({c.placement_id: [_grant_row(g) for g in c.after] for c in decided.changes})
    await store.wake_placer()
    live[mine.placement_id] = mine
    for change in decided.changes:
        p = live[change.placement_id]
        if p is mine:
            reason, trace = f"the host gave it {', '.join(reported)}", workload.traceparent
        else:
            reason = f"swapped with {mine.placement_id}, which the host gave devices this placement held"
            trace = None
        with workload_trace(workload_id=p.workload_id, traceparent=trace, name="scheduler.reallocated"):
            await ctx.uow.emit(_reallocated(change, p, gpus, reason=reason), tenant=p.tenant_id, time=at)


def _grant_row(g: Grant) -> dict[str, object]:
    return {"gpu": g.gpu, "node": g.node, "slot": g.slot, "units": g.units, "kind": g.kind.value}


def _reallocated(
    change: Regrant, p: StoredPlacement, gpus: Mapping[str, GpuView], *, reason: str
) -> WorkloadReallocatedV1:
    return WorkloadReallocatedV1(
        workload_id=p.workload_id,
        tenant_id=p.tenant_id,
        placement_id=p.placement_id,
        node=p.node,
        allocations=[allocation_item(g, gpus) for g in change.after],
        previous=[allocation_item(g, gpus) for g in change.before],
        reason=reason,
    )


async def on_migration_step(event: MigrationStepV1, ctx: Context) -> None:
    # A migrated workload is not started again: the agent's last step says it runs on the new placement.
    # That step's instant is the move's one fact time: the new placement's start (WorkloadRunningV1's
    # started_at), which is also where billing ends the placement it left.
    if event.phase != "running":
        return
    started = WorkloadStartedV1(
        workload_id=event.workload_id,
        tenant_id=event.tenant_id,
        placement_id=event.placement_id,
        node=event.node,
        at=_host_time(event, ctx),
    )
    await on_workload_started(started, ctx)


async def on_workload_exited(event: WorkloadExitedV1, ctx: Context) -> None:
    store, at = ctx.uow.workloads, _host_time(event, ctx)
    facts = RunExit(reason=event.exit_reason, code=event.exit_code, signal=event.signal)
    ended = await store.end_run(
        event.workload_id,
        placement_id=event.placement_id,
        outcome=event.outcome,
        reason=event.reason,
        at=at,
        exit_facts=facts,
    )
    if ended is None:
        # Ended already (a cancel ends a workload at once; its process exits after the grace): the
        # host's facts still complete the workload's terminal view. Nothing is charged or emitted again.
        if facts.known():
            await store.record_exit(event.workload_id, placement_id=event.placement_id, exit_facts=facts)
        return
    tenant = ended.tenant_id
    hours = max((at - (ended.started_at or ended.placed_at)).total_seconds(), 0.0) / 3600
    acc = (
        DecayedUsage(ended.decayed_unit_hours, ended.as_of)
        if ended.decayed_unit_hours is not None and ended.as_of is not None
        else DecayedUsage(0.0, at)
    )
    after = accrue(acc, amount=hours * ended.units_milli / 1000, at=at, half_life=ctx.deps.half_life)
    await ctx.uow.fleet.set_usage(tenant, value=after.value, as_of=after.as_of)
    ended_event = WorkloadEndedV1(
        workload_id=event.workload_id,
        tenant_id=tenant,
        placement_id=event.placement_id,
        outcome=event.outcome,
        reason=event.reason,
        ended_at=at,  # the instant stored above: the scheduler's ended_at and the billed end are one
    )
    with workload_trace(workload_id=event.workload_id, traceparent=ended.traceparent, name="scheduler.ended"):
        await ctx.uow.emit(ended_event, tenant=tenant, time=at)


async def on_migration_requested(event: MigrationRequestedV1, ctx: Context) -> None:
    store = ctx.uow.workloads
    row = await store.lock_workload(event.workload_id)
    if row is None or row.state not in ("placed", "running") or row.placement_id is None:
        return
    placement = await store.placement(row.placement_id)
    assert placement is not None
    await store.start_migration(
        event.workload_id, priority=float(placement.priority), avoid_gpu=event.away_from_gpu
    )
    await store.mark_migrating(row.placement_id)
    await store.wake_placer()


async def on_usage_decayed(event: UsageDecayedV1, ctx: Context) -> None:
    # Billing's ledger is the authority on usage: its figure replaces the local running estimate.
    await ctx.uow.fleet.set_usage(
        event.tenant_id, value=float(event.decayed_unit_hours), as_of=ctx.envelope.time
    )


async def on_budget_threshold_crossed(event: BudgetThresholdCrossedV1, ctx: Context) -> None:
    if not event.hard_stop:
        return
    reason = (
        f"project {event.project!r} reached {event.threshold_pct}% of its {event.month} budget (hard stop)"
    )
    await ctx.uow.fleet.add_stop(
        tenant=event.tenant_id, project=event.project, month=event.month, reason=reason
    )


def handlers(deps: SchedulerDeps) -> Handlers[SchedulerDeps, PostgresSchedulerUnitOfWork]:
    """The main consumer's handlers: the fleet, runs and migrations, and billing's usage and stops."""
    return (
        Handlers(deps, uow=PostgresSchedulerUnitOfWork)
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
