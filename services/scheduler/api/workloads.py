"""Tenant API: submit (one request or a three-step draft), list, get, cancel, queue, priority, images."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Request, status

from libs.common.auth import Caller, tenant_filter
from libs.common.http.app import DocumentedBody
from libs.common.http.errors import NotFound, Unprocessable, error_responses
from services.scheduler.adapters.workload_store import WorkloadStore
from services.scheduler.api.access import ctx_of, submitting_tenant
from services.scheduler.api.errors import unprocessable
from services.scheduler.api.schemas import PriorityOut, QueueEntryOut, WorkloadOut
from services.scheduler.domain.creation import CreationSpec, parse_spec
from services.scheduler.domain.errors import ValidationError
from services.scheduler.service.cancellation import cancel
from services.scheduler.service.context import SchedulerContext
from services.scheduler.service.pass_inputs import load_book
from services.scheduler.service.submission import submit

__all__ = ["router"]

router = APIRouter(tags=["workloads"])
_STATES = ("queued", "migrating", "placed", "running", "completed", "failed", "cancelled", "preempted")


@router.post("/v1/workloads", status_code=status.HTTP_201_CREATED, responses=error_responses(403, 409, 429))
async def create_workload(
    request: Request,
    caller: Caller,
    body: Annotated[dict[str, Any], Body(), DocumentedBody(CreationSpec)],
    tenant_id: str | None = None,
) -> WorkloadOut:
    ctx = ctx_of(request)
    tenant = submitting_tenant(caller, tenant_id)
    try:
        created = await submit(ctx, tenant=tenant, spec=parse_spec(body, catalog=ctx.catalog))
    except ValidationError as exc:
        raise unprocessable(exc) from None
    return WorkloadOut.of(created)


@router.get("/v1/workloads", responses=error_responses(403))
async def list_workloads(
    request: Request,
    caller: Caller,
    tenant_id: str | None = None,
    state: str | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=1_000_000, description="Skip this many first.")] = 0,
    array: Annotated[str | None, Query(description="Only this job array's, in item order.")] = None,
) -> list[WorkloadOut]:
    if state is not None and state not in _STATES:
        raise Unprocessable(f"unknown state {state!r}; one of {', '.join(_STATES)}", field="state")
    rows = await WorkloadStore(ctx_of(request).runtime.pool).workloads(
        tenant=tenant_filter(caller, tenant_id), state=state, limit=limit, offset=offset, array=array
    )
    return [WorkloadOut.of(r) for r in rows]


async def _get(ctx: SchedulerContext, workload_id: str, tenant: str | None) -> WorkloadOut:
    row = await WorkloadStore(ctx.runtime.pool).workload(workload_id, tenant=tenant)
    if row is None:
        raise NotFound(f"no workload {workload_id!r}", field="workload_id")
    return WorkloadOut.of(row)


@router.get("/v1/workloads/{workload_id}", responses=error_responses(404))
async def get_workload(workload_id: str, request: Request, caller: Caller) -> WorkloadOut:
    return await _get(ctx_of(request), workload_id, tenant_filter(caller))


@router.post("/v1/workloads/{workload_id}/cancel", responses=error_responses(404, 409))
async def cancel_workload(workload_id: str, request: Request, caller: Caller) -> WorkloadOut:
    ctx, tenant, now = ctx_of(request), tenant_filter(caller), datetime.now(UTC)
    await cancel(ctx.uow(), workload_id, tenant=tenant, now=now)
    return await _get(ctx, workload_id, tenant)


@router.get("/v1/queue", responses=error_responses(403))
async def queue(request: Request, caller: Caller, tenant_id: str | None = None) -> list[QueueEntryOut]:
    rows = await WorkloadStore(ctx_of(request).runtime.pool).queue(tenant=tenant_filter(caller, tenant_id))
    return [QueueEntryOut.model_validate(r, from_attributes=True) for r in rows]


@router.get("/v1/workloads/{workload_id}/priority", responses=error_responses(404))
async def explain_priority(workload_id: str, request: Request, caller: Caller) -> PriorityOut:
    ctx = ctx_of(request)
    row = await WorkloadStore(ctx.runtime.pool).workload(workload_id, tenant=tenant_filter(caller))
    if row is None:
        raise NotFound(f"no workload {workload_id!r}", field="workload_id")
    book = await load_book(ctx.runtime.pool, ctx, now=datetime.now(UTC))
    e = book.explain(tenant=row.tenant_id, urgency=row.urgency)
    pinned = row.pinned_priority is not None
    prio = float(row.pinned_priority) if row.pinned_priority is not None else e.priority
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
        shares=book.shares_of(row.tenant_id),
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
        {
            "name": i.name,
            "framework": i.framework,
            "versions": list(i.versions),
            "references": dict(i.references),
        }
        for i in catalog.images.values()
    ]
