"""Read-side queries for the configuration API: prices, budgets with this month's spend, tag violations,
idle actions."""

from __future__ import annotations

from typing import Any, TypeAlias

import asyncpg

from services.billing.adapters.price_store import SELECT_PRICES, price_entry
from services.billing.domain.budgets import Budget, BudgetSpend, BudgetState
from services.billing.domain.idle import IdleActionRecord
from services.billing.domain.prices import StoredPrice
from services.billing.domain.tags import FlaggedWorkload

__all__ = ["budgets", "idle_actions", "prices", "tag_violations"]

Conn: TypeAlias = "asyncpg.Connection[Any] | asyncpg.Pool[Any]"

SELECT_BUDGETS = """
SELECT b.tenant_id, b.project, b.limit_micro, b.thresholds, b.hard_stop,
       coalesce(s.spent_micro, 0) AS spent_micro, coalesce(s.crossed, '{}') AS crossed
FROM budgets b
LEFT JOIN budget_state s ON s.tenant_id = b.tenant_id AND s.project = b.project AND s.month = $2
WHERE ($1::text IS NULL OR b.tenant_id = $1) ORDER BY 1, 2
"""
SELECT_VIOLATIONS = (
    "SELECT * FROM tag_violations WHERE ($1::text IS NULL OR tenant_id = $1) ORDER BY flagged_at"
)
SELECT_IDLE_ACTIONS = "SELECT * FROM idle_actions WHERE ($1::text IS NULL OR tenant_id = $1) ORDER BY at"


async def prices(conn: Conn) -> list[StoredPrice]:
    """Every price version, as stored."""
    return [
        StoredPrice(entry=price_entry(r), created_at=r["created_at"]) for r in await conn.fetch(SELECT_PRICES)
    ]


async def budgets(conn: Conn, *, tenant_id: str | None, month: str) -> list[BudgetSpend]:
    """Budgets with their spend and crossed thresholds in `month`."""
    return [_budget_spend(r, month) for r in await conn.fetch(SELECT_BUDGETS, tenant_id, month)]


async def tag_violations(conn: Conn, *, tenant_id: str | None) -> list[FlaggedWorkload]:
    """Workloads flagged for missing required tags, oldest first."""
    return [
        FlaggedWorkload(
            workload_id=r["workload_id"],
            placement_id=r["placement_id"],
            tenant_id=r["tenant_id"],
            missing=tuple(r["missing"]),
            flagged_at=r["flagged_at"],
        )
        for r in await conn.fetch(SELECT_VIOLATIONS, tenant_id)
    ]


async def idle_actions(conn: Conn, *, tenant_id: str | None) -> list[IdleActionRecord]:
    """Idle warnings and release requests, oldest first."""
    return [
        IdleActionRecord(r["workload_id"], r["tenant_id"], r["stage"], r["idle_hours"], r["at"])
        for r in await conn.fetch(SELECT_IDLE_ACTIONS, tenant_id)
    ]


def _budget_spend(r: asyncpg.Record, month: str) -> BudgetSpend:
    budget = Budget(
        tenant_id=r["tenant_id"],
        project=r["project"],
        limit_micro=r["limit_micro"],
        thresholds=tuple(r["thresholds"]),
        hard_stop=r["hard_stop"],
    )
    state = BudgetState(month=month, spent_micro=r["spent_micro"], crossed=frozenset(r["crossed"]))
    return BudgetSpend(budget=budget, state=state)
