"""Domain errors of the scheduler core; the API layer maps them to 4xx responses."""

from __future__ import annotations

__all__ = ["InvalidTransition", "QuotaExceeded", "SchedulerError", "StateConflict", "ValidationError"]


class SchedulerError(Exception):
    """Base of every error the scheduler's pure core raises."""


class ValidationError(SchedulerError):
    """A request field is invalid; `field` is its dotted path, e.g. `resources.count`."""

    def __init__(self, *, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


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
