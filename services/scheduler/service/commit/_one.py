"""One decision, one unit of work: the state change, the quota reservation and its events together."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any

from libs.common.events.scheduler import (
    AllocationItem,
    RunSpec,
    WorkloadEndedV1,
    WorkloadMigratingV1,
    WorkloadPlacedV1,
    WorkloadPreemptionScheduledV1,
    WorkloadQueuedV1,
)
from services.scheduler.adapters.workload_store import WorkloadStore
from services.scheduler.domain.cluster import GpuView, Grant, SlotKind, slot_memory
from services.scheduler.domain.decisions import Placement
from services.scheduler.domain.model import Workload
from services.scheduler.domain.preemption import PreemptionProposal
from services.scheduler.domain.rows import demand_of_grants, grant_of
from services.scheduler.domain.stored import StoredWorkload
from services.scheduler.service.context import SchedulerContext
from services.scheduler.service.trace import workload_trace
from services.scheduler.service.unit_of_work import SchedulerUnitOfWork

__all__ = [
    "allocation_item",
    "commit_placement",
    "commit_preemption",
    "expire_preemption",
    "placed_event",
    "placement_row",
]

log = logging.getLogger(__name__)


def allocation_item(grant: Grant, gpus: Mapping[str, GpuView]) -> AllocationItem:
    """One item of a placed event: the slot, its units and the memory it gives (a share: its part)."""
    gpu = gpus[grant.gpu]
    profile = next((p.profile for p in gpu.partitions if p.id == grant.slot), None)
    memory = slot_memory(gpu, grant)
    return AllocationItem(
        gpu_uuid=grant.gpu,
        partition_id=grant.slot or None,
        units=Decimal(str(grant.units)),
        model=gpu.model,
        profile=profile if grant.kind is SlotKind.MIG else None,
        memory_bytes=memory.bytes,
        memory_isolated=memory.isolated,
    )


def placement_row(
    p: Placement, w: Workload, *, pid: str, now: datetime, gpus: dict[str, GpuView]
) -> dict[str, Any]:
    demand = demand_of_grants(p.grants)
    grants = [
        {"gpu": g.gpu, "node": g.node, "slot": g.slot, "units": g.units, "kind": g.kind.value}
        for g in p.grants
    ]
    return {
        "placement_id": pid,
        "workload_id": w.id,
        "tenant_id": w.tenant,
        "node": p.nodes[0],
        "grants": grants,
        "gpus": demand.gpus,
        "units_milli": demand.units_milli,
        "models": sorted({gpus[g.gpu].model for g in p.grants}),
        "priority": p.priority,
        "preemptible": w.preemptible,
        "ends_at": now + w.time_limit if w.time_limit else None,
        "placed_at": now,
    }


def placed_event(p: Placement, w: Workload, *, pid: str, gpus: dict[str, GpuView]) -> WorkloadPlacedV1:
    return WorkloadPlacedV1(
        workload_id=w.id,
        tenant_id=w.tenant,
        placement_id=pid,
        node=p.nodes[0],
        allocations=[allocation_item(g, gpus) for g in p.grants],
        kind=w.kind.value,
        profile="training" if w.kind.value == "job" else "interactive",
        pricing_class="spot" if w.preemptible else "on_demand",
        tags=dict(w.tags),
        duration_s=w.time_limit.total_seconds() if w.time_limit else None,
        priority=p.priority,
        run=None if w.run is None else RunSpec.model_validate(w.run.model_dump()),
    )


async def _leave_old(
    uow: SchedulerUnitOfWork, ctx: SchedulerContext, row: StoredWorkload, *, new_pid: str, now: datetime
) -> str | None:
    """For a migrating workload: end its old placement and give its quota back before reserving anew."""
    old = row.placement_id
    if row.state != "migrating" or old is None:
        return None
    await uow.workloads.end_placement(old, outcome="migrated", at=now, released=True)
    await ctx.quotas.release(tenant=row.tenant_id, placement_id=old)
    await uow.emit(
        WorkloadMigratingV1(
            workload_id=row.workload_id,
            tenant_id=row.tenant_id,
            from_placement_id=old,
            to_placement_id=new_pid,
            reason="re-placed away from a failed GPU",
        ),
        tenant=row.tenant_id,
        time=now,
    )
    return old


async def commit_placement(
    ctx: SchedulerContext, p: Placement, w: Workload, *, now: datetime, gpus: dict[str, GpuView]
) -> str | None:
    """Place one workload; returns the placement id, or None when it no longer waits or quota refused."""
    pid = f"pl-{uuid.uuid4().hex[:16]}"
    async with ctx.placer_uow() as uow:
        row = await uow.workloads.lock_workload(w.id)
        if row is None or row.state not in ("queued", "migrating"):
            return None  # cancelled or placed by someone else since the pass read it
        with workload_trace(workload_id=w.id, traceparent=row.traceparent, name="scheduler.place"):
            return await _place(ctx, uow, row, p, w, pid=pid, now=now, gpus=gpus)


async def _place(
    ctx: SchedulerContext,
    uow: SchedulerUnitOfWork,
    row: StoredWorkload,
    p: Placement,
    w: Workload,
    *,
    pid: str,
    now: datetime,
    gpus: dict[str, GpuView],
) -> str | None:
    """Inside the placer's unit of work: leave the old placement, reserve quota, record and emit."""
    demand, store = demand_of_grants(p.grants), uow.workloads
    old = await _leave_old(uow, ctx, row, new_pid=pid, now=now)
    exceeded = await ctx.quotas.reserve(tenant=w.tenant, placement_id=pid, demand=demand)
    if exceeded:
        await _reinstate(ctx, row, old)
        return None
    try:
        await store.insert_placement(
            row=placement_row(p, w, pid=pid, now=now, gpus=gpus), slots=[g.key for g in p.grants]
        )
        await store.set_state(w.id, state="placed", placement_id=pid, priority=p.priority)
        # A migration's events share one instant, the pass's. The move's fact time is not known yet: it
        # is when the host runs the workload on its new placement (the agent's last migration step, sent
        # on as WorkloadRunningV1's started_at), which ends the old placement's charge and starts the
        # new one's; so the migrated end carries no ended_at.
        at = now if old is not None else None
        await uow.emit(placed_event(p, w, pid=pid, gpus=gpus), tenant=w.tenant, time=at)
        if old is not None:
            ended = WorkloadEndedV1(
                workload_id=w.id,
                tenant_id=w.tenant,
                placement_id=old,
                outcome="migrated",
                reason=f"moved to {pid}",
            )
            await uow.emit(ended, tenant=w.tenant, time=now)
        await uow.commit()
    except Exception:
        await ctx.quotas.release(tenant=w.tenant, placement_id=pid)
        await _reinstate(ctx, row, old)
        raise
    return pid


async def _reinstate(ctx: SchedulerContext, row: StoredWorkload, old: str | None) -> None:
    """The transaction rolls back, so the old placement lives on: count it in Redis again."""
    if old is None:
        return
    held = await WorkloadStore(ctx.pool_for_placer).placement_grants(old)
    if held is not None:
        demand = demand_of_grants(grant_of(g) for g in held)
        await ctx.quotas.reserve(tenant=row.tenant_id, placement_id=old, demand=demand)


async def commit_preemption(ctx: SchedulerContext, proposal: PreemptionProposal) -> bool:
    """Give a victim its grace deadline, once."""
    async with ctx.placer_uow() as uow:
        store = uow.workloads
        victim = await store.live_placement_of(proposal.victim_id)
        if victim is None:
            return False
        row = await store.schedule_preemption(
            victim, deadline=proposal.deadline, preempted_for=proposal.for_workload_id
        )
        if row is None:
            return False
        await uow.emit(
            WorkloadPreemptionScheduledV1(
                workload_id=proposal.victim_id,
                tenant_id=proposal.victim_tenant,
                placement_id=row.placement_id,
                deadline=proposal.deadline,
                preempted_for=proposal.for_workload_id,
            ),
            tenant=proposal.victim_tenant,
        )
        await uow.commit()
    return True


async def expire_preemption(ctx: SchedulerContext, placement_id: str, *, now: datetime) -> bool:
    """End a victim whose grace is over with outcome preempted, and put it back in the queue."""
    async with ctx.placer_uow() as uow:
        store = uow.workloads
        ended = await store.end_placement(placement_id, outcome="preempted", at=now)
        if ended is None:
            return False
        wid, tenant = ended.workload_id, ended.tenant_id
        await store.set_state(wid, state="queued", placement_id=None)
        reason = f"preempted for {ended.preempted_for}"
        await uow.emit(
            WorkloadEndedV1(
                workload_id=wid,
                tenant_id=tenant,
                placement_id=placement_id,
                outcome="preempted",
                reason=reason,
                requeued=True,
                ended_at=now,  # the scheduler's decision, as stored above (the host reports no end)
            ),
            tenant=tenant,
            time=now,
        )
        position = await store.count_waiting()
        await uow.emit(
            WorkloadQueuedV1(
                workload_id=wid, tenant_id=tenant, position=position, priority=float(ended.priority)
            ),
            tenant=tenant,
        )
        await uow.commit()
    return True
