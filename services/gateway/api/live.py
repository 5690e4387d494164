"""GET /api/live: one Server-Sent Events stream per browser tab (samples, alerts, incidents)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query, Request
from starlette.responses import StreamingResponse

from libs.common.http.errors import Unprocessable, error_responses
from services.gateway.api.access import Authenticated, context_of
from services.gateway.domain.live import LiveRequest, LiveRequestError
from services.gateway.domain.session import token_digest

__all__ = ["router"]

router = APIRouter(tags=["live"])


@router.get("/api/live", response_class=StreamingResponse, responses=error_responses(401, 403, 422))
async def live(
    request: Request,
    current: Authenticated,
    gpus: Annotated[
        str | None, Query(description="GPU UUIDs, comma-separated, whose samples to send.")
    ] = None,
    alerts: Annotated[str | None, Query(description="1: send the caller's alerts on change.")] = None,
    incidents: Annotated[str | None, Query(description="1: send the caller's incidents on change.")] = None,
    last_event_id: Annotated[str | None, Header(description="Set by EventSource when it reconnects.")] = None,
) -> StreamingResponse:
    try:
        wants = LiveRequest.parse(gpus=gpus, alerts=alerts, incidents=incidents)
    except LiveRequestError as exc:
        raise Unprocessable(str(exc), field=exc.field) from exc
    context = context_of(request)
    owner = token_digest(current.token)
    attachment = context.live.attach(owner=owner, last_event_id=last_event_id)

    async def refused() -> bool:
        return await context.sessions.confirm_refused(current.token, current.session)

    frames = context.live.frames(attachment, wants=wants, api_key=current.session.api_key, refused=refused)
    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(frames, media_type="text/event-stream", headers=headers)
