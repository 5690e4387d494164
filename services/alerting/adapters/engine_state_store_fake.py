"""An in-memory twin of StateStore's signal queue and pending-alert list for unit tests: no database."""

from __future__ import annotations

from collections.abc import Sequence

from services.alerting.domain.alert_lifecycle import Transition, pending_writes
from services.alerting.domain.signals import Signal

__all__ = ["FakeStateStore"]


class FakeStateStore:
    """Queued signals, oldest first, as the evaluator would take them; pending alerts by fingerprint."""

    def __init__(self) -> None:
        self.signals: list[Signal] = []
        self.pending: dict[str, Transition] = {}

    async def queue_signal(self, signal: Signal) -> None:
        """Queue a signal for the evaluator."""
        self.signals.append(signal)

    async def record_pending(self, transitions: Sequence[Transition]) -> None:
        """List the alerts that went pending, forget those that fired or ended."""
        writes, forgets = pending_writes(transitions)
        for fingerprint in forgets:
            self.pending.pop(fingerprint, None)
        self.pending.update({c.alert.fingerprint: c for c in writes})

    async def replace_pending(self, pending: Sequence[Transition]) -> None:
        """Exactly these pending alerts."""
        self.pending.clear()
        await self.record_pending(pending)
