"""Tenant API: submit (one request or a three-step draft), list, get, cancel, queue, priority, images."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Request, status

from libs.common.auth import Caller, Principal, tenant_filter
from libs.common.events.scheduler import WorkloadEndedV1
from libs.common.http.errors import Conflict, NotFound, Unprocessable
from services.scheduler.context import SchedulerContext
from services.scheduler.creation import parse_spec
from services.scheduler.errors import ValidationError
from services.scheduler.loader import load_book
from services.scheduler.schemas import PriorityOut, QueueEntryOut, WorkloadOut
from services.scheduler.store import Store
from services.scheduler.submission import submit

__all__ = ["ctx_of", "router", "submitting_tenant"]

router = APIRouter(tags=["workloads"])
_STATES = ("queued", "migrating", "placed", "running", "completed", "failed", "cancelled", "preempted")


def ctx_of(request: Request) -> SchedulerContext:
    """The scheduler context hung on the app."""
    ctx: SchedulerContext = request.app.state.scheduler
    return ctx


def submitting_tenant(caller: Principal, requested: str | None) -> str:
    """The tenant a new workload belongs to: the caller's own, or the one an admin names."""
    tenant = tenant_filter(caller, requested)
    if tenant is None:
        raise Unprocessable("an admin must say which tenant the workload is for", field="tenant_id")
    return tenant


@router.post("/v1/workloads", status_code=status.HTTP_201_CREATED)
async def create_workload(
    request: Request, caller: Caller, body: Annotated[dict[str, Any], Body()], tenant_id: str | None = None
) -> WorkloadOut:
    ctx = ctx_of(request)
    tenant = submitting_tenant(caller, tenant_id)
    try:
        spec = parse_spec(body, catalog=ctx.catalog)
    except ValidationError as exc:
        raise Unprocessable(f"{exc.field}: {exc.message}", field=exc.field) from None
    return WorkloadOut.of(await submit(ctx, tenant=tenant, spec=spec))


@router.get("/v1/workloads")
async def list_workloads(
    request: Request,
    caller: Caller,
    tenant_id: str | None = None,
    state: str | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[WorkloadOut]:
    if state is not None and state not in _STATES:
        raise Unprocessable(f"unknown state {state!r}; one of {', '.join(_STATES)}", field="state")
    rows = await Store(ctx_of(request).runtime.pool).workloads(
        tenant=tenant_filter(caller, tenant_id), state=state, limit=limit
    )
    return [WorkloadOut.of(r) for r in rows]


async def _get(ctx: SchedulerContext, workload_id: str, tenant: str | None) -> WorkloadOut:
    row = await Store(ctx.runtime.pool).workload(workload_id, tenant=tenant)
    if row is None:
        raise NotFound(f"no workload {workload_id!r}", field="workload_id")
    return WorkloadOut.of(row)


@router.get("/v1/workloads/{workload_id}")
async def get_workload(workload_id: str, request: Request, caller: Caller) -> WorkloadOut:
    return await _get(ctx_of(request), workload_id, tenant_filter(caller))


@router.post("/v1/workloads/{workload_id}/cancel")
async def cancel_workload(workload_id: str, request: Request, caller: Caller) -> WorkloadOut:
    ctx, tenant, now = ctx_of(request), tenant_filter(caller), datetime.now(UTC)
    async with ctx.runtime.uow() as uow:
        store = Store(uow.conn)
        row = await store.lock_workload(workload_id)
        if row is None or (tenant is not None and row["tenant_id"] != tenant):
            raise NotFound(f"no workload {workload_id!r}", field="workload_id")
        if row["state"] in ("completed", "failed", "cancelled"):
            raise Conflict(f"workload {workload_id!r} already ended ({row['state']})", field="workload_id")
        pid = row["placement_id"] or ""
        if pid:
            await store.end_placement(pid, outcome="cancelled", at=now)
        await store.end_workload(
            workload_id, state="cancelled", outcome="cancelled", reason="cancelled by caller", at=now
        )
        ended = WorkloadEndedV1(
            workload_id=workload_id,
            tenant_id=row["tenant_id"],
            placement_id=pid,
            outcome="cancelled",
            reason="cancelled by caller",
        )
        await uow.emit(ended, tenant=row["tenant_id"])
        await store.wake_placer()
        await uow.commit()
    return await _get(ctx, workload_id, tenant)


@router.get("/v1/queue")
async def queue(request: Request, caller: Caller, tenant_id: str | None = None) -> list[QueueEntryOut]:
    rows = await Store(ctx_of(request).runtime.pool).queue(tenant=tenant_filter(caller, tenant_id))
    return [QueueEntryOut.model_validate({k: r[k] for k in QueueEntryOut.model_fields}) for r in rows]


@router.get("/v1/workloads/{workload_id}/priority")
async def explain_priority(workload_id: str, request: Request, caller: Caller) -> PriorityOut:
    ctx = ctx_of(request)
    row = await Store(ctx.runtime.pool).workload(workload_id, tenant=tenant_filter(caller))
    if row is None:
        raise NotFound(f"no workload {workload_id!r}", field="workload_id")
    book = await load_book(ctx.runtime.pool, ctx, now=datetime.now(UTC))
    e = book.explain(tenant=row["tenant_id"], urgency=row["urgency"])
    pinned = row["pinned_priority"] is not None
    prio = float(row["pinned_priority"]) if pinned else e.priority
    text = (
        f"0.6 * urgency {e.urgency:.3f} = {e.urgency_term:.3f}; fair share = used {e.decayed_usage:.2f} / "
        f"entitled {e.entitlement:.2f} unit-hours = {e.fair_share:.3f}, so 0.4 * (1 - {e.fair_share:.3f}) = "
        f"{e.fair_share_term:.3f}; min({e.raw:.3f}, 1.0) = {e.priority:.3f}"
        + (f"; kept at {prio:.3f} from before its migration" if pinned else "")
    )
    return PriorityOut(
        workload_id=workload_id,
        urgency=e.urgency,
        urgency_term=e.urgency_term,
        decayed_usage_unit_hours=e.decayed_usage,
        entitlement_unit_hours=e.entitlement,
        shares=book.shares_of(row["tenant_id"]),
        total_shares=book.total_shares(),
        fair_share=e.fair_share,
        fair_share_term=e.fair_share_term,
        raw=e.raw,
        priority=prio,
        pinned=pinned,
        explanation=text,
    )


@router.get("/v1/images")
async def images(request: Request, caller: Caller) -> list[dict[str, Any]]:
    catalog = ctx_of(request).catalog
    return [
        {"name": i.name, "framework": i.framework, "versions": list(i.versions)}
        for i in catalog.images.values()
    ]
