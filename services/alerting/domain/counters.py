"""Counter windows: how much a counter (XIDs, ECC errors) grew, reset-tolerant like PromQL increase()."""

from __future__ import annotations

from datetime import datetime, timedelta
from itertools import pairwise

from pydantic import AwareDatetime, BaseModel, ConfigDict

__all__ = ["CounterPoint", "increase", "record"]


class CounterPoint(BaseModel):
    """One observed counter value."""

    model_config = ConfigDict(frozen=True)

    at: AwareDatetime
    value: float


def record(
    points: tuple[CounterPoint, ...], *, at: datetime, value: float, keep: timedelta
) -> tuple[CounterPoint, ...]:
    """Append a point and forget points older than `keep`, except one baseline at the window's edge."""
    if points and points[-1].value == value and points[-1].at <= at:
        # An unchanged counter adds nothing to increase(); not storing it keeps windows tiny at 1 Hz.
        return points
    updated = (*points, CounterPoint(at=at, value=value))
    horizon = at - keep
    older = [i for i, p in enumerate(updated) if p.at <= horizon]
    return updated[older[-1] :] if older else updated


def increase(points: tuple[CounterPoint, ...], *, since: datetime) -> float:
    """Growth seen by points after `since`; a drop means the counter was reset and restarted from 0."""
    total = 0.0
    for prev, cur in pairwise(points):
        if cur.at > since:
            delta = cur.value - prev.value
            total += delta if delta >= 0 else cur.value
    return total
