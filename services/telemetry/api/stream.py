"""Server-Sent Events of live samples."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse

from libs.common.auth import Caller
from libs.common.http.errors import error_responses
from services.telemetry.api.views import context, visible_latest

__all__ = ["router"]

router = APIRouter(tags=["live"])


@router.get(
    "/v1/stream",
    summary="Live samples as Server-Sent Events (one 'samples' event per refresh)",
    response_class=StreamingResponse,
    responses=error_responses(403),
)
async def stream(
    request: Request,
    caller: Caller,
    node: Annotated[str | None, Query(description="Only this node.")] = None,
    gpu: Annotated[str | None, Query(description="Only this GPU.")] = None,
    tenant: Annotated[str | None, Query(description="Admin: only this tenant's GPUs.")] = None,
    max_events: Annotated[int | None, Query(ge=1, description="Close after this many events.")] = None,
) -> StreamingResponse:
    _, state, _ = context(request)
    await visible_latest(request, caller, requested_tenant=tenant)  # refuses a foreign tenant up front

    async def events() -> AsyncIterator[str]:
        sent = 0
        while max_events is None or sent < max_events:
            rows = await visible_latest(request, caller, requested_tenant=tenant)
            chosen = [r for r in rows if _matches(r, node=node, gpu=gpu)]
            yield f"event: samples\ndata: {json.dumps({'samples': chosen})}\n\n"
            sent += 1
            if await request.is_disconnected():
                return
            await asyncio.sleep(state.settings.stream_refresh_s)

    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(events(), media_type="text/event-stream", headers=headers)


def _matches(row: dict[str, Any], *, node: str | None, gpu: str | None) -> bool:
    return (node is None or row.get("node") == node) and (gpu is None or row.get("gpu") == gpu)
