"""Ledger API: balances, charges and journal entries."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from libs.common.auth import Caller, tenant_filter
from services.billing.adapters import ledger_queries
from services.billing.api.params import End, Limit, Offset, Start, TenantQ, window

__all__ = ["router"]

router = APIRouter(tags=["ledger"])


@router.get("/v1/balances")
async def list_balances(request: Request, caller: Caller, tenant_id: TenantQ = None) -> list[dict[str, Any]]:
    rows = await ledger_queries.balances(
        request.app.state.runtime.pool, tenant_id=tenant_filter(caller, tenant_id)
    )
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
    rows = await ledger_queries.charges(
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
    rows = await ledger_queries.entries_with_postings(
        request.app.state.runtime.pool,
        tenant_id=tenant_filter(caller, tenant_id),
        project=project,
        limit=limit,
        offset=offset,
    )
    return [dict(r) for r in rows]
