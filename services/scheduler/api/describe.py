"""The wizard's helpers: POST /v1/workloads/drafts/describe (a draft from what a person says they need) and
GET /v1/queue/preview (the queue position a request would get). Registered before the drafts and workloads
routers, so neither path is read as an id."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Body, Query, Request, status

from libs.common.auth import Caller
from libs.common.http.errors import Unprocessable, error_responses
from services.scheduler.adapters.catalog_loader import gpu_facts
from services.scheduler.adapters.draft_store import DraftStore
from services.scheduler.adapters.fleet_store import FleetStore
from services.scheduler.adapters.workload_store import WorkloadStore
from services.scheduler.api.access import ctx_of, submitting_tenant
from services.scheduler.api.schemas import DescribeIn, DescribeOut, DraftOut, QueuePreviewOut, ReadingOut
from services.scheduler.domain.decisions import QueueEntry
from services.scheduler.domain.describe import describe
from services.scheduler.domain.model import GpuRequest, UnitsRequest, Workload, WorkloadKind
from services.scheduler.domain.priority import FairShareBook
from services.scheduler.domain.queue_preview import (
    PREVIEW_ID,
    PRIORITY_CLASSES,
    PriorityClassName,
    preview_position,
)
from services.scheduler.service.context import SchedulerContext
from services.scheduler.service.pass_inputs import PassCache, load_book, queue_entry

__all__ = ["router"]

router = APIRouter()
_UNITS_PER_GPU = 8.0  # 1 compute unit = 1/8 of an A100: "any model" previewed as one A100's worth per GPU


async def _fleet_models(ctx: SchedulerContext) -> frozenset[str]:
    return frozenset(g.model for g in await FleetStore(ctx.runtime.pool).gpus())


@router.post(
    "/v1/workloads/drafts/describe",
    tags=["drafts"],
    status_code=status.HTTP_201_CREATED,
    responses=error_responses(403),
)
async def describe_draft(
    request: Request,
    caller: Caller,
    body: Annotated[DescribeIn, Body()],
    tenant_id: str | None = None,
) -> DescribeOut:
    ctx = ctx_of(request)
    tenant = submitting_tenant(caller, tenant_id)
    found = describe(body.text, catalog=ctx.catalog, gpus=gpu_facts(), in_fleet=await _fleet_models(ctx))
    draft_id = f"dr-{uuid.uuid4().hex[:16]}"
    await DraftStore(ctx.runtime.pool).insert_draft(
        draft_id=draft_id, tenant=tenant, body=found.draft.model_dump(mode="json")
    )
    return DescribeOut(
        draft=DraftOut.of(draft_id, tenant=tenant, draft=found.draft, workload_id=None),
        reading=[ReadingOut(phrase=r.phrase, meaning=r.meaning) for r in found.reading],
        not_understood=list(found.not_understood),
        notes=list(found.notes),
    )


async def _waiting(ctx: SchedulerContext, book: FairShareBook) -> list[QueueEntry]:
    """The waiting queue with each workload's priority, as the placer's pass builds it."""
    store, kept = WorkloadStore(ctx.runtime.pool), PassCache()
    waiting = await store.waiting()
    for stored in await store.workloads_by_id([w.workload_id for w in waiting]):
        kept.keep(stored)
    priorities: dict[tuple[str, float], float] = {}
    return [
        queue_entry(w, cache=kept, book=book, priorities=priorities)
        for w in waiting
        if kept.workload(w) is not None
    ]


async def _model(ctx: SchedulerContext, name: str | None) -> str | None:
    if name is None:
        return None
    known = ctx.models.canonical(name)
    if known is not None:
        return known
    fleet = await _fleet_models(ctx)
    if name in fleet:
        return name
    choices = ", ".join(sorted(set(ctx.models.names.values()) | fleet))
    raise Unprocessable(f"unknown GPU model {name!r}; one of {choices}", field="gpu_model")


def _explain(
    *, cls: PriorityClassName, prio: float, fair: float, ahead: int, same: int, model: str | None
) -> str:
    c = PRIORITY_CLASSES[cls]
    what = model or "any model"
    come = "workload comes" if ahead == 1 else "workloads come"
    return (
        f"class {cls} is urgency {c.urgency:g}{' (preemptible, spot)' if c.preemptible else ''}; with this "
        f"tenant's fair share {fair:.3f} its priority is {prio:.3f}. The placer takes the queue highest "
        f"priority first, then oldest: {ahead} waiting {come} before it, "
        f"{same} of them could take {what} GPUs."
    )


def _candidate(
    *, tenant: str, cls: PriorityClassName, model: str | None, count: int, now: datetime
) -> Workload:
    c = PRIORITY_CLASSES[cls]
    resources = GpuRequest(model=model, count=count) if model else UnitsRequest(units=_UNITS_PER_GPU * count)
    return Workload(
        id=PREVIEW_ID,
        tenant=tenant,
        kind=WorkloadKind.JOB,
        image="preview",
        resources=resources,
        urgency=c.urgency,
        submitted_at=now,
        preemptible=c.preemptible,
    )


@router.get("/v1/queue/preview", tags=["workloads"], responses=error_responses(403))
async def preview_queue(
    request: Request,
    caller: Caller,
    priority: PriorityClassName = "normal",
    gpu_model: Annotated[str | None, Query(min_length=1, max_length=128)] = None,
    gpu_count: Annotated[int, Query(ge=1, le=64)] = 1,
    tenant_id: str | None = None,
) -> QueuePreviewOut:
    ctx = ctx_of(request)
    tenant = submitting_tenant(caller, tenant_id)
    model, now = await _model(ctx, gpu_model), datetime.now(UTC)
    book = await load_book(ctx.runtime.pool, ctx, now=now)
    terms = book.explain(tenant=tenant, urgency=PRIORITY_CLASSES[priority].urgency)
    workload = _candidate(tenant=tenant, cls=priority, model=model, count=gpu_count, now=now)
    queue: Sequence[QueueEntry] = await _waiting(ctx, book)
    found = preview_position(queue, candidate=QueueEntry(workload=workload, priority=terms.priority))
    text = _explain(
        cls=priority,
        prio=terms.priority,
        fair=terms.fair_share,
        ahead=found.ahead,
        same=found.same_model_ahead,
        model=model,
    )
    return QueuePreviewOut(
        position=found.position,
        ahead=found.ahead,
        same_model_ahead=found.same_model_ahead,
        priority=priority,
        priority_value=terms.priority,
        explanation=text,
    )
