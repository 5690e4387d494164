"""Server-Sent Events of live samples."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse

from libs.common.auth import Caller, Principal, tenant_filter
from libs.common.events.telemetry import fb_used_pct
from libs.common.http.errors import Unprocessable, error_responses
from services.telemetry.api.views import context, samples_of, visible_latest

__all__ = ["router"]

router = APIRouter(tags=["live"])

#: How many GPUs one stream may name (the console's gateway follows at most this many per tab).
MAX_STREAM_GPUS = 256


@router.get(
    "/v1/stream",
    summary="Live samples as Server-Sent Events (one 'samples' event per refresh)",
    response_class=StreamingResponse,
    responses=error_responses(403, 422),
)
async def stream(
    request: Request,
    caller: Caller,
    node: Annotated[str | None, Query(description="Only this node.")] = None,
    gpu: Annotated[str | None, Query(description="Only this GPU.")] = None,
    gpus: Annotated[
        str | None,
        Query(
            description=f"Only these GPUs, comma-separated (at most {MAX_STREAM_GPUS}): each event then "
            "reads their samples alone, not the caller's whole fleet."
        ),
    ] = None,
    tenant: Annotated[str | None, Query(description="Admin: only this tenant's GPUs.")] = None,
    max_events: Annotated[int | None, Query(ge=1, description="Close after this many events.")] = None,
) -> StreamingResponse:
    _, state, _ = context(request)
    named = _named(gpus)
    await visible_latest(request, caller, requested_tenant=tenant)  # refuses a foreign tenant up front

    async def events() -> AsyncIterator[str]:
        sent = 0
        while max_events is None or sent < max_events:
            rows = await _rows(request, caller, tenant=tenant, gpus=named)
            chosen = [_with_derived(r) for r in rows if _matches(r, node=node, gpu=gpu)]
            yield f"event: samples\ndata: {json.dumps({'samples': chosen})}\n\n"
            sent += 1
            if await request.is_disconnected():
                return
            await asyncio.sleep(state.settings.stream_refresh_s)

    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(events(), media_type="text/event-stream", headers=headers)


def _named(gpus: str | None) -> list[str] | None:
    """The `gpus` parameter's UUIDs (sorted, once each), or None when it is absent."""
    if gpus is None:
        return None
    named = sorted({g.strip() for g in gpus.split(",") if g.strip()})
    if len(named) > MAX_STREAM_GPUS:
        message = f"gpus: at most {MAX_STREAM_GPUS} GPUs per stream, not {len(named)}"
        raise Unprocessable(message, field="gpus")
    return named


async def _rows(
    request: Request, caller: Principal, *, tenant: str | None, gpus: list[str] | None
) -> list[dict[str, Any]]:
    """The samples one event carries: of the named GPUs (those the caller may see), or all it may see."""
    if gpus is None:
        return await visible_latest(request, caller, requested_tenant=tenant)
    return await samples_of(request, gpus, tenant=tenant_filter(caller, tenant))


def _with_derived(row: dict[str, Any]) -> dict[str, Any]:
    """The row as GET /v1/gpus/latest describes it (LatestSample): with the derived fb_used_pct."""
    return {**row, "fb_used_pct": fb_used_pct(row.get("fb_used_bytes"), row.get("fb_total_bytes"))}


def _matches(row: dict[str, Any], *, node: str | None, gpu: str | None) -> bool:
    return (node is None or row.get("node") == node) and (gpu is None or row.get("gpu") == gpu)
