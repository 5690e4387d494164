"""What the use cases read of the service's settings; ``SchedulerSettings`` (the wiring) provides it."""

from __future__ import annotations

from typing import Protocol

__all__ = ["SchedulerOptions"]


class SchedulerOptions(Protocol):
    """The settings the placer, submissions, handlers and routes need, so no layer imports the wiring."""

    @property
    def service_name(self) -> str: ...

    @property
    def service_database_url(self) -> str: ...

    @property
    def session_database_url(self) -> str: ...

    @property
    def pooled(self) -> bool: ...

    @property
    def pg_schema(self) -> str: ...

    @property
    def db_pool_max(self) -> int: ...

    @property
    def pass_interval_s(self) -> float: ...

    @property
    def lock_retry_s(self) -> float: ...

    @property
    def half_life_hours(self) -> float: ...

    @property
    def high_threshold(self) -> float: ...

    @property
    def high_cap(self) -> float: ...

    @property
    def preemption_grace_s(self) -> float: ...

    @property
    def default_shares(self) -> float: ...

    @property
    def history_min_samples(self) -> int: ...
