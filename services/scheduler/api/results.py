"""A workload's log (text, or followed over Server-Sent Events) and its outputs, from the object store."""

from __future__ import annotations

import logging
import mimetypes
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from sse_starlette import EventSourceResponse, ServerSentEvent

from libs.common.auth import Caller, Principal, tenant_filter
from libs.common.http.errors import NotFound, Unprocessable, error_response, error_responses
from libs.common.objectstore import ObjectStore
from libs.common.objectstore.keys import log_prefix
from services.scheduler.adapters.workload_store import WorkloadStore
from services.scheduler.api.access import ctx_of
from services.scheduler.domain.stored import StoredWorkload
from services.scheduler.service.results import (
    MAX_LOG_BYTES,
    LogEvent,
    WorkloadReader,
    follow_log,
    latest_manifest,
    log_index,
    output_object,
    read_log,
    stream_object,
)

__all__ = ["Objects", "Workloads", "objects_of", "on_store_error", "router", "visible", "workloads_of"]

log = logging.getLogger(__name__)
router = APIRouter(tags=["results"])
#: Seconds between pings on a followed log (proxies drop a silent connection; gpuctl reads with 30 s).
PING_S = 10
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_TEXT = "text/plain; charset=utf-8"


def objects_of(request: Request) -> ObjectStore:
    """The object store the app opened (OBJECT_STORE_URL)."""
    store: ObjectStore = request.app.state.objects
    return store


def workloads_of(request: Request) -> WorkloadReader:
    """Workload reads on the runtime's pool: one statement each, no connection held between them."""
    return WorkloadStore(ctx_of(request).runtime.pool)


Objects = Annotated[ObjectStore, Depends(objects_of)]
Workloads = Annotated[WorkloadReader, Depends(workloads_of)]


async def visible(workloads: WorkloadReader, workload_id: str, caller: Principal) -> StoredWorkload:
    """The workload if this caller may see it; the same 404 as ``GET /v1/workloads/{id}`` otherwise."""
    row = await workloads.workload(workload_id, tenant=tenant_filter(caller))
    if row is None:
        raise NotFound(f"no workload {workload_id!r}", field="workload_id")
    return row


async def on_store_error(request: Request, exc: Exception) -> JSONResponse:
    """The object store refused or cannot be reached: 503, retry later (the detail goes to the log)."""
    log.warning("%s %s: the object store failed: %s", request.method, request.url.path, exc)
    return error_response(
        503,
        "service_unavailable",
        "the object store holding logs and outputs is unavailable; retry later",
        details={"error": type(exc).__name__},
    )


def _since_ms(since: str | None, *, now: datetime) -> int | None:
    if since is None:
        return None
    text = since.strip()
    parts = _DURATION.findall(text)
    at: datetime | None = None
    try:
        if parts and "".join(n + u for n, u in parts) == text:
            at = now - timedelta(seconds=sum(float(n) * _UNIT_S[u] for n, u in parts))
        else:
            at = datetime.fromisoformat(text)
    except (ValueError, OverflowError):  # OverflowError: a duration reaching before year 1
        at = None
    if at is None or at.tzinfo is None:
        raise Unprocessable(
            f"since: {since!r} is neither an RFC 3339 time with its offset (2026-12-02T15:00:00Z) "
            "nor a duration such as 90s, 5m, 1h30m or 2d",
            field="since",
        )
    return int(at.timestamp() * 1000)


def _checked_placement(workload_id: str, placement: str | None) -> None:
    if placement is None:
        return
    try:
        log_prefix(workload_id, placement)
    except ValueError:
        raise Unprocessable(f"placement: {placement!r} is not a placement id", field="placement") from None


async def _events(source: AsyncIterator[LogEvent]) -> AsyncIterator[ServerSentEvent]:
    async for event in source:
        yield ServerSentEvent(data=event.data, event=event.kind, id=event.id)


@router.get(
    "/v1/workloads/{workload_id}/logs",
    response_class=Response,
    responses={
        200: {
            "description": f"The log as text (at most {MAX_LOG_BYTES} bytes, the end kept; "
            "`X-Log-Truncated: true` and `X-Log-Omitted-Bytes` when cut), or with `follow=true` "
            "Server-Sent Events: `log` (data: the text; id: placement/seq), `end` (data: "
            '{"complete": bool}), pings.',
            "content": {"text/plain": {}, "text/event-stream": {}},
        },
        **error_responses(404),
    },
)
async def workload_logs(
    workload_id: str,
    caller: Caller,
    objects: Objects,
    workloads: Workloads,
    tail: Annotated[
        int | None, Query(ge=0, le=10_000_000, description="Only the last N lines (of what since keeps).")
    ] = None,
    since: Annotated[
        str | None,
        Query(
            max_length=64,
            description="Only chunks the host read at or after this: an RFC 3339 time or a duration "
            "(90s, 5m, 1h30m, 2d) before now. A chunk (a few seconds of output) is the granularity.",
        ),
    ] = None,
    placement: Annotated[str | None, Query(max_length=200, description="Only this placement's log.")] = None,
    follow: Annotated[
        bool, Query(description="Stream new chunks as Server-Sent Events until the end.")
    ] = False,
    last_event_id: Annotated[
        str | None,
        Header(max_length=200, description="With follow: resume after this event (placement/seq)."),
    ] = None,
) -> Response:
    row = await visible(workloads, workload_id, caller)
    since_ms = _since_ms(since, now=datetime.now(UTC))
    _checked_placement(workload_id, placement)
    if follow:
        source = follow_log(
            objects,
            workloads,
            workload_id=row.workload_id,
            tenant=tenant_filter(caller),
            placement=placement,
            since_ms=since_ms,
            tail=tail,
            last_event_id=last_event_id,
        )
        return EventSourceResponse(_events(source), ping=PING_S)
    index = await log_index(objects, row.workload_id, placement=placement)
    text = await read_log(objects, index.since(since_ms), tail=tail)
    headers = (
        {"X-Log-Truncated": "true", "X-Log-Omitted-Bytes": str(text.omitted_bytes)}
        if text.omitted_bytes
        else {}
    )
    return Response(content=text.data, media_type=_TEXT, headers=headers)


@router.get("/v1/workloads/{workload_id}/outputs", responses=error_responses(404))
async def workload_outputs(
    workload_id: str, caller: Caller, objects: Objects, workloads: Workloads
) -> dict[str, Any]:
    """The manifest of the workload's last placement that left outputs: files, total_bytes, cap, dropped."""
    row = await visible(workloads, workload_id, caller)
    manifest = await latest_manifest(objects, row.workload_id)
    if manifest is None:
        raise NotFound(f"workload {workload_id!r} has no outputs (yet)", field="workload_id")
    return manifest.body


def _checked_path(path: str) -> str:
    parts = path.split("/")
    if not path or path.startswith("/") or "\\" in path or any(p in ("", ".", "..") for p in parts):
        raise Unprocessable(
            f"path: {path!r} is not a relative file path without '.', '..' or empty parts", field="path"
        )
    return path


@router.get(
    "/v1/workloads/{workload_id}/outputs/{path:path}",
    response_class=StreamingResponse,
    responses={
        200: {"description": "The file's bytes.", "content": {"application/octet-stream": {}}},
        **error_responses(404),
    },
)
async def workload_output_file(
    workload_id: str, path: str, caller: Caller, objects: Objects, workloads: Workloads
) -> StreamingResponse:
    row = await visible(workloads, workload_id, caller)
    _checked_path(path)
    manifest = await latest_manifest(objects, row.workload_id)
    info = None if manifest is None else await output_object(objects, row.workload_id, manifest, path)
    if info is None:
        raise NotFound(f"workload {workload_id!r} has no output file {path!r}", field="path")
    name = path.rsplit("/", 1)[-1]
    headers = {
        "Content-Length": str(info.size),
        # Served from the console's origin: never rendered there (a job's HTML could script it).
        "Content-Disposition": f"attachment; filename*=UTF-8''{quote(name)}",
        "X-Content-Type-Options": "nosniff",
    }
    media = mimetypes.guess_type(name)[0] or "application/octet-stream"
    return StreamingResponse(stream_object(objects, info), media_type=media, headers=headers)
