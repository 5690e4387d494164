"""Reconciliation API: the whole ledger against usage recomputed from the lifecycle facts."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Request

from libs.common.auth import Admin
from services.billing.adapters.reconciliation_queries import reconcile_ledger
from services.billing.api.params import api_settings

__all__ = ["router"]

router = APIRouter(tags=["configuration"])


@router.get("/v1/admin/reconciliation")
async def reconciliation(request: Request, _: Admin) -> dict[str, Any]:
    async with (
        request.app.state.runtime.pool.acquire() as conn,
        conn.transaction(isolation="repeatable_read"),
    ):
        result = await reconcile_ledger(
            conn, now=datetime.now(UTC), interval=api_settings(request).rating_interval
        )
    return {
        "equal": result.equal,
        "differences": [_diff(d) for d in result.differences],
        "missing_keys": list(result.missing_keys[:100]),
        "unexpected_keys": list(result.unexpected_keys[:100]),
    }


def _diff(d: Any) -> dict[str, Any]:
    return {
        "tenant_id": d.tenant_id,
        "project": d.project,
        "expected_micro": d.expected_micro,
        "ledger_micro": d.ledger_micro,
    }
