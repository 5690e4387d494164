"""Which series hold an alert (what a tick must look at), and when their pending alerts come due."""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from datetime import datetime, timedelta

from services.alerting.domain.alert_lifecycle import Phase, promote_wait
from services.alerting.domain.rules import RuleBook
from services.alerting.domain.series_evaluation import SeriesState

__all__ = ["PendingTimers"]


class PendingTimers:
    """The alert-holding series, in order (so ticks are deterministic), and a heap of `for` timers."""

    def __init__(self, *, grace: timedelta = timedelta(0)) -> None:
        self._grace = grace  # a timer acts this long after `for` elapses (EvaluationConfig.promote_grace)
        self.alerting: dict[str, None] = {}  # a dict: ordered, so ticks are deterministic
        self._due: list[tuple[datetime, str]] = []
        self._due_at: dict[str, datetime] = {}

    def track(self, key: str, state: SeriesState | None, rules: RuleBook) -> None:
        """Keep the set of alert-holding series and the pending timers in step with a series' state."""
        if state is not None and state.alerts:
            self.alerting[key] = None
            self.schedule(key, state, rules)
        else:
            self.alerting.pop(key, None)
            self._due_at.pop(key, None)

    def schedule(self, key: str, state: SeriesState, rules: RuleBook) -> None:
        """Set the series' timer to when its first pending alert's `for` elapses, plus the grace its next
        sample is waited for (none if none)."""
        pending = [
            due + promote_wait(alert, due, self._grace)
            for name, alert in state.alerts.items()
            if alert.phase is Phase.PENDING
            and (rule := rules.get(name, state.labels)) is not None
            and (due := alert.active_at + rule.for_duration)
        ]
        when = min(pending) if pending else None
        if when is None:
            self._due_at.pop(key, None)
        elif self._due_at.get(key) != when:
            self._due_at[key] = when
            heapq.heappush(self._due, (when, key))

    def due(self, now: datetime) -> Iterator[str]:
        """The alert-holding series whose timer is due by `now`; timers set meanwhile are seen too."""
        due, due_at = self._due, self._due_at
        while due and due[0][0] <= now:
            when, key = heapq.heappop(due)
            if due_at.get(key) == when:
                del due_at[key]
                if key in self.alerting:
                    yield key
