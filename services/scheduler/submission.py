"""Accepting a validated creation request: budget stop, quota pre-check, then one unit of work."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from libs.common.events.scheduler import WorkloadQueuedV1, WorkloadSubmittedV1
from libs.common.http.errors import ApiError, Conflict
from libs.common.observability.tracing import current_traceparent
from services.scheduler.context import SchedulerContext
from services.scheduler.creation import CreationSpec
from services.scheduler.loader import load_book
from services.scheduler.model import GpuRequest, UnitsRequest
from services.scheduler.quota import DIMENSIONS, QuotaLimits, QuotaUsage, check, to_milli
from services.scheduler.quota_store import RebuildNeeded
from services.scheduler.state import limits_of
from services.scheduler.store import Store
from services.scheduler.store_fleet import FleetStore

__all__ = ["QuotaExhausted", "submit"]

_DIM_NAMES = {"gpus": "GPUs", "units_milli": "compute units (milli)", "workloads": "concurrent workloads"}


class QuotaExhausted(ApiError):
    """The tenant's quota is in use now; retry when something finishes."""

    status, code = 429, "quota_exhausted"


def _demand(spec: CreationSpec) -> QuotaUsage:
    """What the request will hold at least (units of a GPU request are known only once placed)."""
    r = spec.resources
    gpus = r.count if isinstance(r, GpuRequest) else 0
    units = to_milli(r.units) if isinstance(r, UnitsRequest) else 0
    return QuotaUsage(gpus=gpus, units_milli=units, workloads=1)


def _describe(dim: str, limits: QuotaLimits, usage: QuotaUsage, demand: QuotaUsage) -> str:
    limit, used, asked = getattr(limits, dim), getattr(usage, dim), getattr(demand, dim)
    return f"{_DIM_NAMES[dim]}: limit {limit}, in use {used}, asked {asked}"


async def _check_quota(ctx: SchedulerContext, *, tenant: str, spec: CreationSpec) -> None:
    row = await FleetStore(ctx.runtime.pool).quota(tenant)
    if row is None:
        return
    limits, demand = limits_of(row), _demand(spec)
    never = check(limits=limits, usage=QuotaUsage(), demand=demand)
    if never:
        details = {d: {"limit": getattr(limits, d), "asked": getattr(demand, d)} for d in never}
        raise Conflict(
            f"request exceeds tenant {tenant!r} quota: {_describe(never[0], limits, QuotaUsage(), demand)}",
            field="resources",
            details=details,
        )
    try:
        usage = await ctx.quotas.usage(tenant=tenant) if await ctx.quotas.intact() else QuotaUsage()
    except RebuildNeeded:
        usage = QuotaUsage()
    now_over = check(limits=limits, usage=usage, demand=demand)
    if now_over:
        details = {
            d: {"limit": getattr(limits, d), "in_use": getattr(usage, d), "asked": getattr(demand, d)}
            for d in DIMENSIONS
            if d in now_over
        }
        raise QuotaExhausted(
            f"quota exhausted for tenant {tenant!r}: {_describe(now_over[0], limits, usage, demand)}",
            field=f"quota.{now_over[0]}",
            details=details,
        )


async def _check_budget(ctx: SchedulerContext, *, tenant: str, spec: CreationSpec, now: datetime) -> None:
    project = spec.tags.get("project")
    if project is None:
        return
    reason = await FleetStore(ctx.runtime.pool).stop_reason(
        tenant=tenant, project=project, month=now.strftime("%Y-%m")
    )
    if reason is not None:
        raise Conflict(f"new work refused: {reason}", field="tags.project")


def _resources(spec: CreationSpec) -> dict[str, str | int]:
    raw = spec.resources.model_dump(mode="json")
    return {k: v if isinstance(v, (str, int)) else str(v) for k, v in raw.items() if v is not None}


async def submit(ctx: SchedulerContext, *, tenant: str, spec: CreationSpec) -> dict[str, Any]:
    """Record a workload as submitted and queued, with both events, and wake the placer."""
    now = datetime.now(UTC)
    await _check_budget(ctx, tenant=tenant, spec=spec, now=now)
    await _check_quota(ctx, tenant=tenant, spec=spec)
    wid = f"wl-{uuid.uuid4().hex[:16]}"
    book = await load_book(ctx.runtime.pool, ctx, now=now)
    prio = book.explain(tenant=tenant, urgency=spec.urgency).priority
    row = {
        "workload_id": wid,
        "tenant_id": tenant,
        "kind": spec.kind.value,
        "spec": spec.model_dump(mode="json"),
        "urgency": spec.urgency,
        "preemptible": spec.preemptible,
        "tags": spec.tags,
        "submitted_at": now,
        "priority": prio,
        "traceparent": current_traceparent(),
    }
    async with ctx.runtime.uow() as uow:
        store = Store(uow.conn)
        await store.insert_workload(row=row)
        submitted = WorkloadSubmittedV1(
            workload_id=wid,
            tenant_id=tenant,
            kind=spec.kind.value,
            urgency=spec.urgency,
            preemptible=spec.preemptible,
            pricing_class="spot" if spec.preemptible else "on_demand",
            tags=spec.tags,
            resources=_resources(spec),
        )
        await uow.emit(submitted, tenant=tenant)
        position = await store.count_waiting()
        queued = WorkloadQueuedV1(workload_id=wid, tenant_id=tenant, position=position, priority=prio)
        await uow.emit(queued, tenant=tenant)
        await store.wake_placer()
        await uow.commit()
    ctx.wake.set()
    return row
