"""An in-memory twin of StateStore's signal queue for unit tests: no database."""

from __future__ import annotations

from services.alerting.domain.signals import Signal

__all__ = ["FakeStateStore"]


class FakeStateStore:
    """Queued signals, oldest first, as the evaluator would take them."""

    def __init__(self) -> None:
        self.signals: list[Signal] = []

    async def queue_signal(self, signal: Signal) -> None:
        """Queue a signal for the evaluator."""
        self.signals.append(signal)
