"""Latest samples, history from rollups, optimisation hints and the Prometheus exposition of all GPUs."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import PlainTextResponse

from libs.common.auth import Admin, Caller, tenant_filter
from libs.common.http import NotFound, Unprocessable
from libs.common.http.errors import error_responses
from services.telemetry.adapters.rollup_store import RollupStore
from services.telemetry.api.exposition import CONTENT_TYPE, LastXid, render
from services.telemetry.api.schemas import GpuHints, HistoryWindow, LatestSample, WorkloadHints
from services.telemetry.api.views import context, latest, samples_of, visible_latest
from services.telemetry.domain.gpu_models import model_for_name
from services.telemetry.domain.hints import hints_for
from services.telemetry.domain.metrics import GpuSample

__all__ = ["router"]

MAX_HISTORY = timedelta(days=31)
router = APIRouter(tags=["telemetry"])


@router.get(
    "/v1/gpus/latest", summary="Latest sample of every GPU the caller may see", responses=error_responses(403)
)
async def list_latest(
    request: Request,
    caller: Caller,
    node: Annotated[str | None, Query(description="Only this node's GPUs.")] = None,
    tenant: Annotated[str | None, Query(description="Admin: only this tenant's GPUs.")] = None,
) -> list[LatestSample]:
    rows = await visible_latest(request, caller, requested_tenant=tenant)
    return sorted((latest(r) for r in rows if node is None or r.get("node") == node), key=_order)


@router.get("/v1/gpus/{uuid}/latest", summary="Latest sample of one GPU", responses=error_responses(404))
async def gpu_latest(uuid: str, request: Request, caller: Caller) -> LatestSample:
    found = await samples_of(request, [uuid], tenant=tenant_filter(caller))
    if not found:
        raise NotFound(f"no samples of GPU {uuid!r} visible to this key", field="uuid")
    return latest(found[0])


@router.get(
    "/v1/nodes/{node}/latest", summary="Latest samples of one node's GPUs", responses=error_responses(404)
)
async def node_latest(node: str, request: Request, caller: Caller) -> list[LatestSample]:
    _, _, live = context(request)
    gpus = await live.node_gpus(node)
    if not gpus:
        raise NotFound(f"node {node!r} has not reported", field="node")
    rows = await samples_of(request, gpus, tenant=tenant_filter(caller))
    return sorted((latest(r) for r in rows), key=_order)


@router.get("/v1/gpus/{uuid}/history", summary="One GPU's rollups over a time range")
async def gpu_history(
    uuid: str,
    request: Request,
    caller: Caller,
    start: Annotated[datetime | None, Query(description="Inclusive start (default: end - 1 h).")] = None,
    end: Annotated[datetime | None, Query(description="Exclusive end (default: now).")] = None,
    limit: Annotated[int, Query(ge=1, le=50_000, description="At most this many windows.")] = 10_000,
) -> list[HistoryWindow]:
    end = _aware(end, field="end") if end else datetime.now(UTC)
    start = _aware(start, field="start") if start else end - timedelta(hours=1)
    if start >= end:
        raise Unprocessable("start must be before end", field="start")
    if end - start > MAX_HISTORY:
        raise Unprocessable(f"the range may span at most {MAX_HISTORY.days} days", field="end")
    runtime, _, _ = context(request)
    rows = await RollupStore(runtime.pool).history(
        gpu_uuid=uuid, start=start, end=end, tenant=tenant_filter(caller), limit=limit
    )
    return [HistoryWindow.model_validate(r) for r in rows]


@router.get(
    "/v1/workloads/{workload_id}/hints",
    summary="Optimisation hints from recent samples",
    responses=error_responses(404),
)
async def workload_hints(workload_id: str, request: Request, caller: Caller) -> WorkloadHints:
    _, state, live = context(request)
    rows = state.view.by_workload.get(workload_id, [])
    tenant = tenant_filter(caller)
    if not rows or (tenant is not None and rows[0].tenant_id != tenant):
        raise NotFound(f"no running workload {workload_id!r} visible to this key", field="workload_id")
    gpus: list[GpuHints] = []
    for gpu in sorted({r.gpu_uuid for r in rows}):
        recent = await live.recent(gpu)
        samples = [_as_sample(r) for r in recent if not r.get("lost_reason")]
        model = model_for_name(recent[-1].get("model", "")) if recent else None
        gpus.append(
            GpuHints(gpu_uuid=gpu, samples=len(samples), hints=hints_for(samples=samples, model=model))
        )
    return WorkloadHints(workload_id=workload_id, gpus=gpus)


@router.get(
    "/metrics/gpus",
    summary="Prometheus exposition of every GPU (dcgm-exporter names and labels)",
    response_class=PlainTextResponse,
)
async def gpu_metrics(request: Request, _: Admin) -> Response:
    _runtime, _state, live = context(request)
    samples = await live.all()
    # Rendering 10,000 GPUs takes about half a second: off the event loop, so ingestion goes on.
    text = await asyncio.to_thread(render, samples, last_xid=_last_xid(request))
    return Response(text, media_type=CONTENT_TYPE)


def _last_xid(request: Request) -> LastXid:
    """This app's LastXid: the last XID code is learnt from one render to the next."""
    tracker: LastXid | None = getattr(request.app.state, "last_xid", None)
    if tracker is None:
        tracker = request.app.state.last_xid = LastXid()
    return tracker


def _order(sample: LatestSample) -> tuple[str, int, str]:
    return sample.node, sample.index, sample.gpu


def _aware(value: datetime, *, field: str) -> datetime:
    if value.tzinfo is None:
        raise Unprocessable("give a timezone, e.g. 2025-01-01T00:00:00Z", field=field)
    return value


def _as_sample(raw: dict[str, object]) -> GpuSample:
    """A stored GpuMetrics as the hints' GpuSample (their counter fields are named differently)."""
    return GpuSample.model_validate(
        {
            **raw,
            "gpu_uuid": raw["gpu"],
            "timestamp": raw["at"],
            "ecc_sbe_total": raw.get("ecc_sbe_count"),
            "ecc_dbe_total": raw.get("ecc_dbe_count"),
        }
    )
