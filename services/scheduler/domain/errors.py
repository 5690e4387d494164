"""Domain errors of the scheduler core; the API layer maps them to 4xx responses."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "InvalidTransition",
    "ItemProblem",
    "ItemsInvalid",
    "QuotaExceeded",
    "SchedulerError",
    "StateConflict",
    "ValidationError",
]


class SchedulerError(Exception):
    """Base of every error the scheduler's pure core raises."""


class ValidationError(SchedulerError):
    """A request field is invalid; `field` is its dotted path, e.g. `resources.count`."""

    def __init__(self, *, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True, slots=True)
class ItemProblem:
    """One refused item of a job array: its index, and the field and message a single request would get."""

    index: int
    field: str
    message: str

    @property
    def path(self) -> str:
        """The field as a dotted path in the array's body (``items.3.resources.count``)."""
        return f"items.{self.index}" + ("" if self.field == "body" else f".{self.field}")

    def detail(self) -> dict[str, int | str]:
        """As an error's ``details`` lists it: index, field in the array's body, message."""
        return {"index": self.index, "field": self.path, "message": self.message}


class ItemsInvalid(SchedulerError):
    """Items of a job array are invalid: every one of them, in index order."""

    def __init__(self, problems: Sequence[ItemProblem]) -> None:
        first = problems[0]
        more = f" (and {len(problems) - 1} more items)" if len(problems) > 1 else ""
        super().__init__(f"{first.path}: {first.message}{more}")
        self.problems = tuple(problems)


class InvalidTransition(SchedulerError):
    """A workload was asked to move between two states that the lifecycle does not connect."""

    def __init__(self, *, workload_id: str, source: str, target: str) -> None:
        super().__init__(f"workload {workload_id}: {source} -> {target} is not allowed")
        self.workload_id = workload_id
        self.source = source
        self.target = target


class QuotaExceeded(SchedulerError):
    """Reserving a demand would take a tenant past one or more of its limits."""

    def __init__(self, *, tenant: str, exceeded: tuple[str, ...]) -> None:
        super().__init__(f"tenant {tenant}: quota exceeded for {', '.join(exceeded)}")
        self.tenant = tenant
        self.exceeded = exceeded


class StateConflict(SchedulerError):
    """The cluster state given to the core is inconsistent, e.g. one slot held twice."""
