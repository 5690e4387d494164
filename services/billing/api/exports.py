"""Export API: a project's ledger rows streamed as CSV, JSON Lines or Parquet, and daily export schedules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse
from starlette.background import BackgroundTask

from libs.common.auth import Caller
from services.billing.adapters.export_queries import MEDIA_TYPES, ExportRequest, export_chunks, export_totals
from services.billing.adapters.export_schedule_store import ExportScheduleStore
from services.billing.api.params import End, Start, TenantQ, one_tenant, window
from services.billing.api.schemas import ScheduleIn

__all__ = ["router"]

router = APIRouter(tags=["ledger"])


@router.get("/v1/exports/{project}")
async def export_project(
    project: str,
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
    pool = request.app.state.runtime.pool
    conn = await pool.acquire()
    tx = conn.transaction(isolation="repeatable_read", readonly=True)
    released = False

    async def release() -> None:
        nonlocal released
        if not released:
            released = True
            await tx.rollback()
            await pool.release(conn)

    try:
        await tx.start()
        totals = await export_totals(conn, export)
    except BaseException:
        await pool.release(conn)
        raise

    async def body() -> Any:
        try:
            async for piece in export_chunks(conn, export):
                yield piece
        finally:
            await release()

    headers = {
        "Content-Disposition": f'attachment; filename="{project}_{lo.date()}_{hi.date()}.{format}"',
        "X-Export-Rows": str(totals.rows),
        "X-Export-Debit-Micro": str(totals.debit_micro),
        "X-Export-Credit-Micro": str(totals.credit_micro),
    }
    return StreamingResponse(
        body(), media_type=MEDIA_TYPES[format], headers=headers, background=BackgroundTask(release)
    )


@router.put("/v1/exports/{project}/schedule")
async def schedule_export(project: str, body: ScheduleIn, request: Request, caller: Caller) -> dict[str, Any]:
    tenant = one_tenant(caller, body.tenant_id)
    first = body.first_day or (datetime.now(UTC).date() - timedelta(days=1))
    await ExportScheduleStore(request.app.state.runtime.pool).schedule(
        tenant_id=tenant, project=project, format=body.format, first_day=first
    )
    return {"tenant_id": tenant, "project": project, "format": body.format, "first_day": first.isoformat()}
