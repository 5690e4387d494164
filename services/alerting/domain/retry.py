"""Delivery retry policy: exponential backoff with full jitter, Retry-After, bounded, then dead-letter."""

from __future__ import annotations

from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Protocol

from pydantic import AwareDatetime, BaseModel, ConfigDict

__all__ = [
    "DeadLetter",
    "Delivered",
    "RandomSource",
    "Retry",
    "RetryPolicy",
    "next_attempt",
    "parse_retry_after",
]

# Worth retrying: the receiver may recover. Other 4xx mean our request is wrong and will stay wrong.
_RETRYABLE_4XX = frozenset({408, 429})


class RandomSource(Protocol):
    """Anything with `random() -> float in [0, 1)`, e.g. random.Random; injected so tests are exact."""

    def random(self) -> float: ...


class RetryPolicy(BaseModel):
    """Backoff base and cap, and the bounds after which a delivery is dead-lettered."""

    model_config = ConfigDict(frozen=True)

    base: timedelta = timedelta(seconds=1)
    cap: timedelta = timedelta(minutes=5)
    max_attempts: int = 20
    max_age: timedelta = timedelta(hours=24)


class Retry(BaseModel):
    """Try again at `at`."""

    model_config = ConfigDict(frozen=True)

    at: AwareDatetime


class DeadLetter(BaseModel):
    """Give up; `reason` is shown in the delivery log."""

    model_config = ConfigDict(frozen=True)

    reason: str


class Delivered(BaseModel):
    """The receiver accepted it."""

    model_config = ConfigDict(frozen=True)


def parse_retry_after(value: str | None, *, now: datetime) -> timedelta | None:
    """Retry-After as delay-seconds or an HTTP-date; None when absent or unreadable."""
    if not value:
        return None
    text = value.strip()
    if text.isdigit():
        return timedelta(seconds=int(text))
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    return max(when - now, timedelta(0)) if when.tzinfo else None


def _backoff(attempt: int, policy: RetryPolicy, rng: RandomSource) -> timedelta:
    # Full jitter (uniform in [0, min(cap, base·2^(n-1))]) spreads a recovering receiver's load.
    ceiling = min(policy.cap, policy.base * 2.0 ** min(attempt - 1, 32))
    return ceiling * rng.random()


def next_attempt(
    *,
    attempt: int,
    status: int | None,
    retry_after: str | None,
    now: datetime,
    first_attempt_at: datetime,
    policy: RetryPolicy,
    rng: RandomSource,
) -> Retry | DeadLetter | Delivered:
    """Decide after attempt number `attempt` (1-based); status None means no response (connection error)."""
    if status is not None and 200 <= status < 300:
        return Delivered()
    if status is not None and status < 500 and status not in _RETRYABLE_4XX:
        return DeadLetter(reason=f"HTTP {status} is not retryable")
    if attempt >= policy.max_attempts:
        return DeadLetter(reason=f"gave up after {attempt} attempts (last: {status or 'no response'})")
    asked = parse_retry_after(retry_after, now=now) if status in _RETRYABLE_4XX | {503} else None
    at = now + (asked if asked is not None else _backoff(attempt, policy, rng))
    if at - first_attempt_at > policy.max_age:
        return DeadLetter(reason=f"would exceed the maximum age of {policy.max_age}")
    return Retry(at=at)
