"""Reconciliation API: the whole ledger against usage recomputed from billing's lifecycle facts, against
the hosts' own running and exit facts, per placement (the independent check), its SLA credits against
the incidents behind them, and its balance with the credits in it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Request

from libs.common.auth import Admin
from services.billing.adapters.reconciliation_queries import (
    check_credits_against_incidents,
    check_hosts,
    ledger_sides,
    reconcile_ledger,
)
from services.billing.api.params import api_settings
from services.billing.domain.host_facts import PlacementCheck

__all__ = ["router"]

router = APIRouter(tags=["configuration"])


@router.get("/v1/admin/reconciliation")
async def reconciliation(request: Request, _: Admin) -> dict[str, Any]:
    async with (
        request.app.state.runtime.pool.acquire() as conn,
        conn.transaction(isolation="repeatable_read"),
    ):
        interval = api_settings(request).rating_interval
        result = await reconcile_ledger(conn, now=datetime.now(UTC), interval=interval)
        hosts = await check_hosts(conn, interval=interval)
        credits = await check_credits_against_incidents(conn)
        debit, credit = await ledger_sides(conn)
    differing = hosts.differences
    balanced = debit == credit
    return {
        "equal": result.equal and hosts.equal and credits.equal and balanced,
        "balanced": balanced,
        "debit_micro": debit,
        "credit_micro": credit,
        "differences": [_diff(d) for d in result.differences],
        "missing_keys": list(result.missing_keys[:100]),
        "unexpected_keys": list(result.unexpected_keys[:100]),
        "hosts": {
            "equal": hosts.equal,
            "placements_checked": len(hosts.checked),
            "difference_micro": sum(c.difference_micro for c in differing),
            "placements": [_placement(c) for c in differing[:100]],
        },
        "credits": {
            "equal": credits.equal,
            "decisions": credits.decisions,
            "credited_micro": credits.credited_micro,
            "problems": list(credits.problems[:100]),
        },
    }


def _diff(d: Any) -> dict[str, Any]:
    return {
        "tenant_id": d.tenant_id,
        "project": d.project,
        "expected_micro": d.expected_micro,
        "ledger_micro": d.ledger_micro,
    }


def _placement(c: PlacementCheck) -> dict[str, Any]:
    def iso(at: datetime | None) -> str | None:
        return None if at is None else at.astimezone(UTC).isoformat()

    return {
        "placement_id": c.placement_id,
        "workload_id": c.workload_id,
        "tenant_id": c.tenant_id,
        "project": c.project,
        "host_started_at": iso(c.host_started_at),
        "host_ended_at": iso(c.host_ended_at),
        "end_basis": c.end_basis.value,
        "billed_started_at": iso(c.billed_started_at),
        "billed_ended_at": iso(c.billed_ended_at),
        "expected_micro": c.expected_micro,
        "ledger_micro": c.ledger_micro,
        "difference_micro": c.difference_micro,
    }
