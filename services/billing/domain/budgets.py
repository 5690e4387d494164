"""Monthly project budgets: which thresholds a charge newly crosses, and when to hard-stop."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

__all__ = [
    "DEFAULT_THRESHOLDS",
    "Budget",
    "BudgetDecision",
    "BudgetSpend",
    "BudgetState",
    "apply_charge",
    "month_of",
]

DEFAULT_THRESHOLDS: tuple[int, ...] = (50, 80, 100)


@dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    """A project's monthly limit; thresholds are whole percentages of it."""

    tenant_id: str
    project: str
    limit_micro: int
    thresholds: tuple[int, ...] = DEFAULT_THRESHOLDS
    hard_stop: bool = False  # at 100% ask the scheduler to refuse new work for the project

    def __post_init__(self) -> None:
        if self.limit_micro <= 0:
            raise ValueError("a budget limit must be positive")
        if any(t <= 0 for t in self.thresholds):
            raise ValueError("thresholds must be positive percentages")


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetState:
    """Spend and crossed thresholds for one project in one month (`YYYY-MM`, UTC)."""

    month: str
    spent_micro: int = 0
    crossed: frozenset[int] = frozenset()


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetSpend:
    """A budget with its spend and crossed thresholds in one month (`state.month`)."""

    budget: Budget
    state: BudgetState


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetDecision:
    """The state after a charge, the thresholds it newly crossed, and whether to hard-stop."""

    state: BudgetState
    newly_crossed: tuple[int, ...]
    hard_stop: bool


def month_of(at: datetime) -> str:
    """The budget month of an instant, as `YYYY-MM` in UTC (`at` must be timezone-aware)."""
    if at.tzinfo is None:
        raise ValueError("times must be timezone-aware")
    return at.astimezone(UTC).strftime("%Y-%m")


def apply_charge(*, budget: Budget, state: BudgetState, amount_micro: int, at: datetime) -> BudgetDecision:
    """Add a charge; each threshold fires once per month, and a new month starts from zero."""
    month = month_of(at)
    current = state if state.month == month else BudgetState(month=month)
    spent = current.spent_micro + amount_micro
    reached = {t for t in budget.thresholds if spent * 100 >= budget.limit_micro * t}
    newly = tuple(sorted(reached - current.crossed))
    new_state = BudgetState(month=month, spent_micro=spent, crossed=current.crossed | reached)
    stop = budget.hard_stop and spent >= budget.limit_micro
    return BudgetDecision(state=new_state, newly_crossed=newly, hard_stop=stop)
