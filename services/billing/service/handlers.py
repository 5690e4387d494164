"""Event handlers: lifecycle facts into allocations and charges, the hosts' own reports kept for
reconciliation, recovery's incidents and the moves they cause into SLA credits, telemetry rollups into
idle reclaim."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Literal, TypeAlias

from libs.common.bus.handlers import HandlerContext, Handlers
from libs.common.events.agent import MigrationStepV1, WorkloadExitedV1, WorkloadStartedV1
from libs.common.events.billing import IdleReclaimV1
from libs.common.events.recovery import IncidentClosedV1, IncidentOpenedV1
from libs.common.events.scheduler import (
    AllocationItem,
    WorkloadEndedV1,
    WorkloadMigratingV1,
    WorkloadPlacedV1,
    WorkloadReallocatedV1,
    WorkloadRunningV1,
)
from libs.common.events.telemetry import NodeRollupV1
from services.billing.adapters.unit_of_work import PostgresBillingUnitOfWork
from services.billing.domain.host_facts import HostFact, HostFactKind
from services.billing.domain.idle import IdleAction, IdlePolicy, UtilisationRollup, evaluate_idle
from services.billing.domain.placements import HeldDevice, Placement
from services.billing.domain.prices import PricingClass
from services.billing.domain.rating import EndReason
from services.billing.domain.sla import DEFAULT_POLICY, Incident, SlaPolicy, WorkloadMove
from services.billing.domain.tags import RequiredTagPolicy, check_required, effective_tags
from services.billing.service.credits import settle
from services.billing.service.metering import MeteringConfig, close_placement, open_placement, start_placement
from services.billing.service.unit_of_work import BillingUnitOfWork

__all__ = ["BillingDeps", "Context", "handlers"]

_MINUTE = timedelta(minutes=1)

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class BillingDeps:
    """What the handlers need besides the unit of work: metering, idle and the default SLA policy."""

    metering: MeteringConfig
    idle: IdlePolicy
    sla: SlaPolicy = DEFAULT_POLICY


#: What every handler of billing gets: its deps and billing's unit of work.
Context: TypeAlias = HandlerContext[BillingDeps, BillingUnitOfWork]


async def on_workload_placed(event: WorkloadPlacedV1, ctx: Context) -> None:
    """Hold the placement's allocations (priced at the event's time, charged once it runs); flag missing
    required tags."""
    at = ctx.envelope.time
    policies = ctx.uow.policies
    tags = effective_tags(
        tenant_defaults=await policies.tenant_tags(event.tenant_id), workload_tags=event.tags
    )
    required = await policies.required(event.tenant_id)
    violation = check_required(
        policy=RequiredTagPolicy(tenant_id=event.tenant_id, required=required),
        workload_id=event.workload_id,
        tags=tags,
    )
    if violation is not None:
        await policies.flag(
            workload_id=event.workload_id,
            placement_id=event.placement_id,
            tenant_id=event.tenant_id,
            missing=violation.missing,
            at=at,
        )
    placement = Placement(
        placement_id=event.placement_id,
        workload_id=event.workload_id,
        tenant_id=event.tenant_id,
        pricing_class=PricingClass(event.pricing_class),
        tags=tags,
        devices=tuple(HeldDevice(model=a.model, units=a.units, profile=a.profile) for a in event.allocations),
    )
    await open_placement(
        ctx.uow,
        placement=placement,
        kind=event.kind,
        at=at,
        event_id=ctx.envelope.id,
        config=ctx.deps.metering,
    )
    await _settle_moves_into(event.placement_id, ctx)  # it may have run before it was placed here


async def on_workload_running(event: WorkloadRunningV1, ctx: Context) -> None:
    """Charge the placement from when its host started it; a workload that moved here stops being
    charged where it was at that same instant, and the time an incident cost it is settled."""
    await start_placement(
        ctx.uow,
        workload_id=event.workload_id,
        placement_id=event.placement_id,
        at=event.started_at or ctx.envelope.time,  # an older scheduler's event: its envelope time
        event_id=ctx.envelope.id,
        config=ctx.deps.metering,
    )
    await _settle_moves_into(event.placement_id, ctx)


async def on_workload_migrating(event: WorkloadMigratingV1, ctx: Context) -> None:
    """Keep a move an incident caused (charging changes only when the new placement runs)."""
    if event.incident_id is None:
        return  # a rebalancing move: no fault, no credit
    move = WorkloadMove(
        event_id=ctx.envelope.id,
        workload_id=event.workload_id,
        tenant_id=event.tenant_id,
        from_placement_id=event.from_placement_id,
        to_placement_id=event.to_placement_id,
        incident_id=event.incident_id,
        reason=event.reason,
        at=ctx.envelope.time,
    )
    await ctx.uow.sla.record_move(move)
    await _settle(ctx, [move])


async def on_workload_reallocated(event: WorkloadReallocatedV1, ctx: Context) -> None:
    """The placement's charge goes on unchanged: billing prices what a placement holds by model, MIG
    profile and units, never by which GPU, and a reallocation keeps all three (the scheduler refuses
    one that would not). Should one arrive that changes them, the placement stays priced as placed."""
    if _priced(event.allocations) != _priced(event.previous):
        log.warning(
            "placement %s was reallocated onto devices priced otherwise; it stays priced as placed",
            event.placement_id,
        )


def _priced(items: Sequence[AllocationItem]) -> Counter[tuple[str, str | None, Decimal]]:
    return Counter((a.model, a.profile, a.units) for a in items)


async def on_incident_opened(event: IncidentOpenedV1, ctx: Context) -> None:
    """Keep what failed, where and when it was detected (the start of the time it cost)."""
    incident = Incident(
        incident_id=event.incident_id,
        fault_type=event.fault_type,
        node=event.node,
        gpu_uuid=event.gpu_uuid,
        severity=event.severity,
        detected_at=ctx.envelope.time,
        opened_event_id=ctx.envelope.id,
    )
    await ctx.uow.sla.record_incident(incident)
    await _settle(ctx, await ctx.uow.sla.moves_for_incident(event.incident_id))


async def on_incident_closed(event: IncidentClosedV1, ctx: Context) -> None:
    """Keep how an incident ended (shown with the credits it gave)."""
    await ctx.uow.sla.close_incident(
        event.incident_id, outcome=event.outcome, at=ctx.envelope.time, event_id=ctx.envelope.id
    )


async def _settle_moves_into(placement_id: str, ctx: Context) -> None:
    await _settle(ctx, await ctx.uow.sla.moves_into(placement_id))


async def _settle(ctx: Context, moves: list[WorkloadMove]) -> None:
    if moves:
        await settle(ctx.uow, moves, default_policy=ctx.deps.sla, interval=ctx.deps.metering.interval)


async def on_workload_ended(event: WorkloadEndedV1, ctx: Context) -> None:
    """Close the placement at the end's own time (the host's exit, or the scheduler's cancel or
    preemption), not when the event was written, and post its final charges."""
    if not event.placement_id:
        return  # cancelled while queued: never placed, nothing to charge (and no fact to keep)
    if event.outcome == "migrated":
        return  # charged on until the workload runs on its new placement (that start closes this one)
    await close_placement(
        ctx.uow,
        workload_id=event.workload_id,
        placement_id=event.placement_id,
        at=event.ended_at or ctx.envelope.time,  # an older scheduler's event: its envelope time
        reason=EndReason(event.outcome),
        event_id=ctx.envelope.id,
        config=ctx.deps.metering,
    )


async def on_host_started(event: WorkloadStartedV1, ctx: Context) -> None:
    """Keep the host's report that a placement runs (the independent side of reconciliation)."""
    await _keep_host_fact(event, ctx, kind=HostFactKind.RUNNING, outcome=None)


async def on_host_migration_step(event: MigrationStepV1, ctx: Context) -> None:
    """The last step of a move is the host running the workload on its new placement."""
    if event.phase == "running":
        await _keep_host_fact(event, ctx, kind=HostFactKind.RUNNING, outcome=None)


async def on_host_exited(event: WorkloadExitedV1, ctx: Context) -> None:
    """Keep the host's report that a placement's process ended."""
    await _keep_host_fact(event, ctx, kind=HostFactKind.EXITED, outcome=event.outcome)


async def _keep_host_fact(
    event: WorkloadStartedV1 | MigrationStepV1 | WorkloadExitedV1,
    ctx: Context,
    *,
    kind: HostFactKind,
    outcome: str | None,
) -> None:
    fact = HostFact(
        kind=kind,
        workload_id=event.workload_id,
        tenant_id=event.tenant_id,
        placement_id=event.placement_id,
        node=event.node,
        at=event.at or ctx.envelope.time,  # an older agent: its envelope, written at the fact
        outcome=outcome,
    )
    await ctx.uow.allocations.record_host_fact(
        event_id=ctx.envelope.id, fact=fact, event_type=ctx.envelope.type
    )


async def on_node_rollup(event: NodeRollupV1, ctx: Context) -> None:
    """Fold one minute of per-GPU utilisation into each running instance's idle state."""
    busiest: dict[str, float] = {}
    for gpu in event.gpus:
        util = gpu.sm_util_max if gpu.sm_util_max is not None else gpu.sm_util_avg
        if gpu.workload_id is None or util is None or gpu.samples == 0:
            continue  # no evidence either way
        busiest[gpu.workload_id] = max(util, busiest.get(gpu.workload_id, 0.0))
    for workload_id, util in sorted(busiest.items()):
        await _observe(ctx, workload_id=workload_id, window=(event.minute, event.minute + _MINUTE), util=util)


async def _observe(ctx: Context, *, workload_id: str, window: tuple[datetime, datetime], util: float) -> None:
    store = ctx.uow.allocations
    known = await store.open_workload(workload_id)
    if known is None or known[1] != "instance":
        return  # only running instances are reclaimed; jobs end by themselves
    tenant_id = known[0]
    start, end = window
    decision = evaluate_idle(
        state=await store.idle_state(workload_id),
        rollups=[UtilisationRollup(start=start, end=end, max_gpu_util_pct=util)],
        policy=ctx.deps.idle,
        now=end,
    )
    await store.save_idle(workload_id=workload_id, tenant_id=tenant_id, state=decision.state)
    state = decision.state
    idle_h = _idle_hours(state.idle_since, state.observed_until)
    for action in decision.actions:
        stage: Literal["warning", "release_requested"] = (
            "warning" if action is IdleAction.WARN else "release_requested"
        )
        await store.record_idle_action(
            workload_id=workload_id, tenant_id=tenant_id, stage=stage, idle_hours=idle_h, at=end
        )
        await ctx.uow.emit(
            IdleReclaimV1(tenant_id=tenant_id, workload_id=workload_id, stage=stage, idle_hours=idle_h),
            tenant=tenant_id,
        )


def _idle_hours(since: datetime | None, until: datetime | None) -> float:
    if since is None or until is None:
        return 0.0
    return round((until - since).total_seconds() / 3600, 4)


def handlers(deps: BillingDeps) -> Handlers[BillingDeps, PostgresBillingUnitOfWork]:
    """The main consumer's handlers: lifecycle facts into charges, the hosts' reports kept, incidents and
    moves into SLA credits, rollups into idle reclaim."""
    return (
        Handlers(deps, uow=PostgresBillingUnitOfWork)
        .on(WorkloadPlacedV1, on_workload_placed)
        .on(WorkloadRunningV1, on_workload_running)
        .on(WorkloadEndedV1, on_workload_ended)
        .on(WorkloadMigratingV1, on_workload_migrating)
        .on(WorkloadReallocatedV1, on_workload_reallocated)
        .on(IncidentOpenedV1, on_incident_opened)
        .on(IncidentClosedV1, on_incident_closed)
        .on(WorkloadStartedV1, on_host_started)
        .on(MigrationStepV1, on_host_migration_step)
        .on(WorkloadExitedV1, on_host_exited)
        .on(NodeRollupV1, on_node_rollup)
    )
