"""An in-memory twin of BudgetStore for unit tests: budgets and their monthly state, no database."""

from __future__ import annotations

from services.billing.domain.budgets import Budget, BudgetState

__all__ = ["FakeBudgetStore"]


class FakeBudgetStore:
    """Budgets by (tenant, project) and their state by (tenant, project, month), as BudgetStore keeps them."""

    def __init__(self) -> None:
        self.budgets: dict[tuple[str, str], Budget] = {}
        self.states: dict[tuple[str, str, str], BudgetState] = {}

    async def budget(self, tenant_id: str, project: str) -> Budget | None:
        """A project's budget, if it has one."""
        return self.budgets.get((tenant_id, project))

    async def state(self, tenant_id: str, project: str, month: str) -> BudgetState:
        """A project's spend in one month."""
        return self.states.get((tenant_id, project, month), BudgetState(month=month))

    async def save_state(self, tenant_id: str, project: str, state: BudgetState) -> None:
        """Store a project's spend in one month."""
        self.states[(tenant_id, project, state.month)] = state

    async def put(
        self, tenant_id: str, project: str, *, limit_micro: int, thresholds: list[int], hard_stop: bool
    ) -> None:
        """Create or replace a project's budget (its monthly state stays)."""
        self.budgets[(tenant_id, project)] = Budget(
            tenant_id=tenant_id,
            project=project,
            limit_micro=limit_micro,
            thresholds=tuple(thresholds),
            hard_stop=hard_stop,
        )

    async def delete(self, tenant_id: str, project: str) -> bool:
        """Remove a project's budget; False when it had none."""
        return self.budgets.pop((tenant_id, project), None) is not None
