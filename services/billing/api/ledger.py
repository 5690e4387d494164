"""Ledger API: balances, charges and journal entries."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from fastapi import APIRouter, Request

from libs.common.auth import Caller, tenant_filter
from libs.common.http.errors import error_responses
from services.billing.adapters import ledger_queries
from services.billing.api.params import End, Limit, Offset, Start, TenantQ, window
from services.billing.domain.ledger import JournalEntry

__all__ = ["router"]

router = APIRouter(tags=["ledger"])


@router.get("/v1/balances", responses=error_responses(403))
async def list_balances(request: Request, caller: Caller, tenant_id: TenantQ = None) -> list[dict[str, Any]]:
    rows = await ledger_queries.balances(
        request.app.state.runtime.pool, tenant_id=tenant_filter(caller, tenant_id)
    )
    return [asdict(b) for b in rows]


@router.get("/v1/charges", responses=error_responses(403))
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
    return [asdict(c) for c in rows]


@router.get("/v1/ledger/entries", responses=error_responses(403))
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
    return [_entry(e) for e in rows]


def _entry(e: JournalEntry) -> dict[str, Any]:
    return {
        "entry_id": e.entry_id,
        "source_event_id": e.source_event_id,
        "at": e.at,
        "tenant_id": e.tenant_id,
        "project": e.project,
        "description": e.description,
        "reverses_entry_id": e.reverses_entry_id,
        "postings": [
            {"account": p.account, "debit_micro": p.debit_micro, "credit_micro": p.credit_micro}
            for p in e.postings
        ],
    }
