"""Read-side queries for the configuration API: prices, budgets with this month's spend, tag violations,
idle actions."""

from __future__ import annotations

from typing import Any, TypeAlias

import asyncpg

from services.billing.adapters.price_store import SELECT_PRICES

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


async def prices(conn: Conn) -> list[asyncpg.Record]:
    """Every price version, as stored."""
    return list(await conn.fetch(SELECT_PRICES))


async def budgets(conn: Conn, *, tenant_id: str | None, month: str) -> list[asyncpg.Record]:
    """Budgets with their spend and crossed thresholds in `month`."""
    return list(await conn.fetch(SELECT_BUDGETS, tenant_id, month))


async def tag_violations(conn: Conn, *, tenant_id: str | None) -> list[asyncpg.Record]:
    """Workloads flagged for missing required tags, oldest first."""
    return list(await conn.fetch(SELECT_VIOLATIONS, tenant_id))


async def idle_actions(conn: Conn, *, tenant_id: str | None) -> list[asyncpg.Record]:
    """Idle warnings and release requests, oldest first."""
    return list(await conn.fetch(SELECT_IDLE_ACTIONS, tenant_id))
