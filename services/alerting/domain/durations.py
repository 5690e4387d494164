"""Prometheus duration strings ("5m", "1h30m", "0s") to and from timedelta."""

from __future__ import annotations

import re
from datetime import timedelta

__all__ = ["MAX_DURATION", "DurationOutOfRange", "format_duration", "parse_duration"]

#: The longest duration a rule or silence takes (`for`, `keep_firing_for`, windows): a year. Longer
#: ones mean nothing for an alert, and an unbounded one overflows when added to a time.
MAX_DURATION = timedelta(days=365)

# Same grammar as Prometheus's model.ParseDuration: units in descending order, each at most once.
_DURATION_RE = re.compile(r"(?:(\d+)y)?(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?(?:(\d+)ms)?")
_UNIT_MS = (
    ("y", 365 * 86_400_000),
    ("w", 7 * 86_400_000),
    ("d", 86_400_000),
    ("h", 3_600_000),
    ("m", 60_000),
    ("s", 1_000),
    ("ms", 1),
)


class DurationOutOfRange(ValueError):
    """A well-formed duration longer than allowed; the message names the maximum."""


def parse_duration(text: str, *, maximum: timedelta = MAX_DURATION) -> timedelta:
    """Parse a Prometheus duration; ValueError for anything Prometheus would refuse, or above `maximum`."""
    if text == "0":
        return timedelta(0)
    found = _DURATION_RE.fullmatch(text)
    if not text or found is None:
        raise ValueError(f"not a valid duration string: {text!r}")
    total_ms = sum(int(g) * ms for g, (_, ms) in zip(found.groups(), _UNIT_MS, strict=True) if g)
    if total_ms > maximum // timedelta(milliseconds=1):
        raise DurationOutOfRange(f"duration {text!r} is longer than the maximum of {_in_days(maximum)}")
    return timedelta(milliseconds=total_ms)


def _in_days(value: timedelta) -> str:
    return f"{value.days}d" if value == timedelta(days=value.days) else format_duration(value)


def format_duration(value: timedelta) -> str:
    """Shortest Prometheus spelling of a non-negative duration (years are never emitted)."""
    remaining = round(value.total_seconds() * 1000)
    if remaining < 0:
        raise ValueError("durations are never negative")
    if remaining == 0:
        return "0s"
    parts = []
    for unit, ms in _UNIT_MS[1:]:
        count, remaining = divmod(remaining, ms)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)
