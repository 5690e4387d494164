"""Postgres access for budgets and their per-month state (never commits)."""

from __future__ import annotations

from typing import Any, TypeAlias

import asyncpg

from services.billing.domain.budgets import Budget, BudgetState

__all__ = ["BudgetStore"]

Conn: TypeAlias = "asyncpg.Connection[Any] | asyncpg.Pool[Any]"

SELECT_BUDGET = "SELECT * FROM budgets WHERE tenant_id = $1 AND project = $2"
SELECT_BUDGET_STATE = (
    "SELECT * FROM budget_state WHERE tenant_id = $1 AND project = $2 AND month = $3 FOR UPDATE"
)
UPSERT_BUDGET_STATE = (
    "INSERT INTO budget_state (tenant_id, project, month, spent_micro, crossed) VALUES ($1, $2, $3, $4, $5) "
    "ON CONFLICT (tenant_id, project, month) DO UPDATE SET spent_micro = $4, crossed = $5"
)
UPSERT_BUDGET = """
INSERT INTO budgets (tenant_id, project, limit_micro, thresholds, hard_stop) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (tenant_id, project)
DO UPDATE SET limit_micro = $3, thresholds = $4, hard_stop = $5, updated_at = now()
"""
DELETE_BUDGET = "DELETE FROM budgets WHERE tenant_id = $1 AND project = $2 RETURNING 1"


class BudgetStore:
    """Budgets and their per-month state."""

    def __init__(self, conn: Conn) -> None:
        self._conn = conn

    async def budget(self, tenant_id: str, project: str) -> Budget | None:
        """A project's budget, if it has one."""
        row = await self._conn.fetchrow(SELECT_BUDGET, tenant_id, project)
        if row is None:
            return None
        return Budget(
            tenant_id=tenant_id,
            project=project,
            limit_micro=row["limit_micro"],
            thresholds=tuple(row["thresholds"]),
            hard_stop=row["hard_stop"],
        )

    async def state(self, tenant_id: str, project: str, month: str) -> BudgetState:
        """A project's spend in one month, locked until the transaction ends."""
        row = await self._conn.fetchrow(SELECT_BUDGET_STATE, tenant_id, project, month)
        if row is None:
            return BudgetState(month=month)
        return BudgetState(month=month, spent_micro=row["spent_micro"], crossed=frozenset(row["crossed"]))

    async def save_state(self, tenant_id: str, project: str, state: BudgetState) -> None:
        """Store a project's spend in one month."""
        await self._conn.execute(
            UPSERT_BUDGET_STATE, tenant_id, project, state.month, state.spent_micro, sorted(state.crossed)
        )

    async def put(
        self, tenant_id: str, project: str, *, limit_micro: int, thresholds: list[int], hard_stop: bool
    ) -> None:
        """Create or replace a project's budget."""
        await self._conn.execute(UPSERT_BUDGET, tenant_id, project, limit_micro, thresholds, hard_stop)

    async def delete(self, tenant_id: str, project: str) -> bool:
        """Remove a project's budget; False when it had none."""
        return bool(await self._conn.fetchval(DELETE_BUDGET, tenant_id, project))
