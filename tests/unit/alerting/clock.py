"""The injected clock for alerting tests: every instant is T0 plus some seconds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

T0 = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    """T0 plus `seconds`."""
    return T0 + timedelta(seconds=seconds)
