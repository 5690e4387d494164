"""Event handlers: lifecycle facts into allocations and charges, telemetry rollups into idle reclaim."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal, Protocol

from libs.common.bus.handlers import HandlerContext, Handlers
from libs.common.db.uow import UnitOfWork
from libs.common.events.billing import IdleReclaimV1
from libs.common.events.scheduler import WorkloadEndedV1, WorkloadMigratingV1, WorkloadPlacedV1
from libs.common.events.telemetry import NodeRollupV1
from services.billing.adapters.allocation_store import AllocationStore
from services.billing.adapters.policy_store import PolicyStore
from services.billing.domain.idle import IdleAction, IdlePolicy, IdleState, UtilisationRollup, evaluate_idle
from services.billing.domain.placements import HeldDevice, Placement
from services.billing.domain.prices import PricingClass
from services.billing.domain.rating import EndReason
from services.billing.domain.tags import RequiredTagPolicy, check_required, effective_tags
from services.billing.service.metering import MeteringConfig, close_placement, open_placement

__all__ = ["BillingDeps", "IdleStates", "handlers"]

_MINUTE = timedelta(minutes=1)


class IdleStates(Protocol):
    """What idle reclaim reads and writes (AllocationStore; FakeAllocationStore in unit tests)."""

    async def open_workload(self, workload_id: str) -> tuple[str, str] | None: ...

    async def idle_state(self, workload_id: str) -> IdleState: ...

    async def save_idle(self, *, workload_id: str, tenant_id: str, state: IdleState) -> None: ...

    async def record_idle_action(
        self, *, workload_id: str, tenant_id: str, stage: str, idle_hours: float, at: datetime
    ) -> None: ...


def _sql_idle_states(uow: UnitOfWork) -> IdleStates:
    return AllocationStore(uow.conn)


@dataclass(frozen=True, slots=True, kw_only=True)
class BillingDeps:
    """What the handlers need besides the unit of work: metering and idle configuration, the idle store."""

    metering: MeteringConfig
    idle: IdlePolicy
    idle_states: Callable[[UnitOfWork], IdleStates] = _sql_idle_states


async def on_workload_placed(event: WorkloadPlacedV1, ctx: HandlerContext[BillingDeps]) -> None:
    """Open the placement's allocations at the event's time; flag missing required tags."""
    at = ctx.envelope.time
    policies = PolicyStore(ctx.uow.conn)
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


async def on_workload_ended(event: WorkloadEndedV1, ctx: HandlerContext[BillingDeps]) -> None:
    """Close the placement at the event's time and post its final charges."""
    if not event.placement_id:
        return  # cancelled while queued: never placed, nothing to charge (and no fact to keep)
    await close_placement(
        ctx.uow,
        placement_id=event.placement_id,
        at=ctx.envelope.time,
        reason=EndReason(event.outcome),
        event_id=ctx.envelope.id,
        config=ctx.deps.metering,
    )


async def on_workload_migrating(event: WorkloadMigratingV1, ctx: HandlerContext[BillingDeps]) -> None:
    """Close the placement being left; the new one is charged from its own placed event."""
    await close_placement(
        ctx.uow,
        placement_id=event.from_placement_id,
        at=ctx.envelope.time,
        reason=EndReason.MIGRATED,
        event_id=ctx.envelope.id,
        config=ctx.deps.metering,
    )


async def on_node_rollup(event: NodeRollupV1, ctx: HandlerContext[BillingDeps]) -> None:
    """Fold one minute of per-GPU utilisation into each running instance's idle state."""
    busiest: dict[str, float] = {}
    for gpu in event.gpus:
        util = gpu.sm_util_max if gpu.sm_util_max is not None else gpu.sm_util_avg
        if gpu.workload_id is None or util is None or gpu.samples == 0:
            continue  # no evidence either way
        busiest[gpu.workload_id] = max(util, busiest.get(gpu.workload_id, 0.0))
    for workload_id, util in sorted(busiest.items()):
        await _observe(ctx, workload_id=workload_id, window=(event.minute, event.minute + _MINUTE), util=util)


async def _observe(
    ctx: HandlerContext[BillingDeps], *, workload_id: str, window: tuple[datetime, datetime], util: float
) -> None:
    store = ctx.deps.idle_states(ctx.uow)
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


def handlers(deps: BillingDeps) -> Handlers[BillingDeps]:
    """The main consumer's handlers: lifecycle facts into charges, rollups into idle reclaim."""
    return (
        Handlers(deps)
        .on(WorkloadPlacedV1, on_workload_placed)
        .on(WorkloadEndedV1, on_workload_ended)
        .on(WorkloadMigratingV1, on_workload_migrating)
        .on(NodeRollupV1, on_node_rollup)
    )
