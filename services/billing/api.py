"""Ledger API: balances, charges, journal entries, cost analysis and streamed per-project exports."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.background import BackgroundTask

from libs.common.auth import Caller, tenant_filter
from libs.common.auth.principal import Principal
from libs.common.http import Unprocessable
from services.billing import views
from services.billing.export_stream import (
    MEDIA_TYPES,
    ExportFormat,
    ExportRequest,
    export_chunks,
    export_totals,
)

__all__ = ["router"]

router = APIRouter(tags=["ledger"])

UPSERT_SCHEDULE = (
    "INSERT INTO export_schedules (tenant_id, project, format, first_day) VALUES ($1, $2, $3, $4) "
    "ON CONFLICT (tenant_id, project, format) DO UPDATE SET first_day = $4"
)
_BEGINNING = datetime(1970, 1, 1, tzinfo=UTC)
_END_OF_TIME = datetime(9999, 1, 1, tzinfo=UTC)
Start = Annotated[datetime | None, Query(description="Inclusive start (ISO 8601 with offset).")]
End = Annotated[datetime | None, Query(description="Exclusive end (ISO 8601 with offset).")]
TenantQ = Annotated[str | None, Query(description="Admins: the tenant to act for; tenants: their own.")]
Limit = Annotated[int, Query(ge=1, le=10_000)]
Offset = Annotated[int, Query(ge=0)]


def window(start: datetime | None, end: datetime | None) -> tuple[datetime, datetime]:
    """Validated [start, end): timezone-aware, start before end."""
    for name, value in (("start", start), ("end", end)):
        if value is not None and value.tzinfo is None:
            raise Unprocessable(f"{name} must carry a UTC offset, e.g. 2025-03-01T00:00:00Z", field=name)
    lo, hi = start or _BEGINNING, end or _END_OF_TIME
    if hi <= lo:
        raise Unprocessable("end must be after start", field="end")
    return lo, hi


def one_tenant(caller: Principal, requested: str | None) -> str:
    """The single tenant an operation concerns; admins must name it."""
    tenant = tenant_filter(caller, requested)
    if tenant is None:
        raise Unprocessable("admins must name the tenant with tenant_id", field="tenant_id")
    return tenant


@router.get("/v1/balances")
async def list_balances(request: Request, caller: Caller, tenant_id: TenantQ = None) -> list[dict[str, Any]]:
    rows = await views.balances(request.app.state.runtime.pool, tenant_id=tenant_filter(caller, tenant_id))
    return [dict(r) for r in rows]


@router.get("/v1/charges")
async def list_charges(
    request: Request,
    caller: Caller,
    tenant_id: TenantQ = None,
    project: str | None = None,
    workload_id: str | None = None,
    start: Start = None,
    end: End = None,
    limit: Limit = 1000,
    offset: Offset = 0,
) -> list[dict[str, Any]]:
    lo, hi = window(start, end)
    rows = await views.charges(
        request.app.state.runtime.pool,
        tenant_id=tenant_filter(caller, tenant_id),
        project=project,
        workload_id=workload_id,
        start=lo,
        end=hi,
        limit=limit,
        offset=offset,
    )
    return [dict(r) for r in rows]


@router.get("/v1/ledger/entries")
async def list_entries(
    request: Request,
    caller: Caller,
    tenant_id: TenantQ = None,
    project: str | None = None,
    limit: Limit = 1000,
    offset: Offset = 0,
) -> list[dict[str, Any]]:
    rows = await views.entries_with_postings(
        request.app.state.runtime.pool,
        tenant_id=tenant_filter(caller, tenant_id),
        project=project,
        limit=limit,
        offset=offset,
    )
    return [dict(r) for r in rows]


@router.get("/v1/costs")
async def cost_analysis(
    request: Request,
    caller: Caller,
    group_by: Annotated[str, Query(description="project, team, model, day or tag:<key>.")] = "project",
    tenant_id: TenantQ = None,
    start: Start = None,
    end: End = None,
) -> dict[str, Any]:
    lo, hi = window(start, end)
    grouping, _, tag = group_by.partition(":")
    if grouping not in views.GROUPINGS or (grouping == "tag") != bool(tag):
        raise Unprocessable("group_by must be project, team, model, day or tag:<key>", field="group_by")
    rows = await views.costs(
        request.app.state.runtime.pool,
        tenant_id=tenant_filter(caller, tenant_id),
        group_by=grouping,
        tag=tag or None,
        start=lo,
        end=hi,
    )
    groups = [
        {"key": r["key"], "amount_micro": r["amount_micro"], "compute_unit_hours": r["compute_unit_hours"]}
        for r in rows
    ]
    return {"group_by": group_by, "total_micro": sum(g["amount_micro"] for g in groups), "groups": groups}


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


class ScheduleIn(BaseModel):
    """A daily export of one project."""

    model_config = ConfigDict(extra="forbid")

    format: ExportFormat = Field(default="parquet", description="csv, jsonl or parquet.")
    first_day: date | None = Field(default=None, description="First UTC day to export; default yesterday.")
    tenant_id: str | None = Field(default=None, description="Admins: the tenant to act for.")


@router.put("/v1/exports/{project}/schedule")
async def schedule_export(project: str, body: ScheduleIn, request: Request, caller: Caller) -> dict[str, Any]:
    tenant = one_tenant(caller, body.tenant_id)
    first = body.first_day or (datetime.now(UTC).date() - timedelta(days=1))
    await request.app.state.runtime.pool.execute(
        UPSERT_SCHEDULE,
        tenant,
        project,
        body.format,
        first,
    )
    return {"tenant_id": tenant, "project": project, "format": body.format, "first_day": first.isoformat()}
