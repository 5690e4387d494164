"""Export API: a project's ledger rows streamed as CSV, JSON Lines or Parquet, and daily export schedules."""

from __future__ import annotations

from contextlib import AsyncExitStack
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal
from urllib.parse import quote

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from libs.common.auth import Caller
from libs.common.http.errors import error_responses
from services.billing.adapters.export_queries import MEDIA_TYPES, ExportRequest, export_chunks, export_totals
from services.billing.adapters.export_schedule_store import ExportScheduleStore
from services.billing.api.params import End, Project, Start, TenantQ, one_tenant, window
from services.billing.api.schemas import ScheduleIn

__all__ = ["content_disposition", "router"]

router = APIRouter(tags=["ledger"])


_EXPORT_BODY = {"schema": {"type": "string", "format": "binary"}}


@router.get(
    "/v1/exports/{project}",
    response_class=StreamingResponse,
    responses={
        200: {
            "description": "The project's ledger rows in the format asked for.",
            "content": dict.fromkeys(MEDIA_TYPES.values(), _EXPORT_BODY),
        },
        **error_responses(403),
    },
)
async def export_project(
    project: Project,
    request: Request,
    caller: Caller,
    start: Start = None,
    end: End = None,
    format: Annotated[Literal["csv", "jsonl", "parquet"], Query(description="Output format.")] = "csv",
    tenant_id: TenantQ = None,
) -> StreamingResponse:
    lo, hi = window(start, end)
    export = ExportRequest(
        tenant_id=one_tenant(caller, tenant_id), project=project, start=lo, end=hi, format=format
    )
    disposition = content_disposition(f"{project}_{lo.date()}_{hi.date()}.{format}")
    # Whatever fails before the response holds the connection (the totals, the headers), the `async with`
    # rolls the transaction back and releases the connection; after that, the response's end does.
    async with AsyncExitStack() as stack:
        conn = await stack.enter_async_context(request.app.state.runtime.pool.acquire())
        await stack.enter_async_context(conn.transaction(isolation="repeatable_read", readonly=True))
        totals = await export_totals(conn, export)
        headers = {
            "Content-Disposition": disposition,
            "X-Export-Rows": str(totals.rows),
            "X-Export-Debit-Micro": str(totals.debit_micro),
            "X-Export-Credit-Micro": str(totals.credit_micro),
        }
        response = _LeasedStream(export_chunks(conn, export), media_type=MEDIA_TYPES[format], headers=headers)
        response.lease = stack.pop_all()
    return response


class _LeasedStream(StreamingResponse):
    """A streamed export that gives its connection back however it ends: done, failed or the client gone."""

    lease: AsyncExitStack | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        except BaseException as exc:
            await self._end(exc)
            raise
        await self._end(None)

    async def _end(self, exc: BaseException | None) -> None:
        closing = getattr(self.body_iterator, "aclose", None)
        if closing is not None:  # stops a COPY still running on the connection before it goes back
            await closing()
        if self.lease is not None:  # a failure rolls the transaction back; the connection goes back
            await self.lease.__aexit__(type(exc) if exc else None, exc, exc.__traceback__ if exc else None)


def content_disposition(filename: str) -> str:
    """An attachment header that any file name fits (RFC 6266): an ASCII fallback and the UTF-8 name."""
    fallback = "".join(c if " " <= c <= "~" and c not in '"\\%' else "_" for c in filename)
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(filename, safe='')}"


@router.put("/v1/exports/{project}/schedule", responses=error_responses(403))
async def schedule_export(
    project: Project, body: ScheduleIn, request: Request, caller: Caller
) -> dict[str, Any]:
    tenant = one_tenant(caller, body.tenant_id)
    first = body.first_day or (datetime.now(UTC).date() - timedelta(days=1))
    await ExportScheduleStore(request.app.state.runtime.pool).schedule(
        tenant_id=tenant, project=project, format=body.format, first_day=first
    )
    return {"tenant_id": tenant, "project": project, "format": body.format, "first_day": first.isoformat()}
