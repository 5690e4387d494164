"""What the use cases read of the service's settings; ``RecoverySettings`` (the wiring) provides it."""

from __future__ import annotations

from datetime import timedelta
from typing import Protocol, runtime_checkable

from services.recovery.domain.incidents import RecoveryPolicy

__all__ = ["RecoveryConfig"]


@runtime_checkable
class RecoveryConfig(Protocol):
    """The settings the handlers and loops need, so the service layer does not import the wiring."""

    @property
    def service_name(self) -> str: ...

    @property
    def kafka_bootstrap_servers(self) -> str: ...

    @property
    def settle_timedelta(self) -> timedelta: ...

    @property
    def policy(self) -> RecoveryPolicy: ...

    @property
    def tick_s(self) -> float: ...

    @property
    def window_s(self) -> int: ...

    @property
    def correlation_window_s(self) -> float: ...

    def topic(self, logical: str) -> str: ...

    def group_id(self, consumer: str) -> str: ...
