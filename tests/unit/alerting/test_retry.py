from __future__ import annotations

import random
from datetime import timedelta

import pytest

from services.alerting.domain.retry import (
    DeadLetter,
    Delivered,
    Retry,
    RetryPolicy,
    next_attempt,
    parse_retry_after,
)
from tests.unit.alerting.clock import at

POLICY = RetryPolicy(
    base=timedelta(seconds=1), cap=timedelta(seconds=60), max_attempts=5, max_age=timedelta(hours=1)
)


class Fixed:
    def __init__(self, value: float) -> None:
        self.value = value

    def random(self) -> float:
        return self.value


def decide(attempt: int, status: int | None, retry_after: str | None = None, rng: float = 0.5) -> object:
    return next_attempt(
        attempt=attempt,
        status=status,
        retry_after=retry_after,
        now=at(100),
        first_attempt_at=at(0),
        policy=POLICY,
        rng=Fixed(rng),
    )


def test_success_is_delivered() -> None:
    assert decide(1, 204) == Delivered()


@pytest.mark.parametrize("status", [500, 502, 503, None, 408])
def test_server_errors_timeouts_and_connection_failures_retry(status: int | None) -> None:
    assert isinstance(decide(1, status), Retry)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410, 422, 301])
def test_client_errors_other_than_408_and_429_dead_letter_at_once(status: int) -> None:
    outcome = decide(1, status)
    assert isinstance(outcome, DeadLetter)
    assert str(status) in outcome.reason


def test_backoff_doubles_up_to_the_cap_scaled_by_full_jitter() -> None:
    delays = [decide(n, 500, rng=0.999999) for n in (1, 2, 3, 4)]
    assert [round((d.at - at(100)).total_seconds()) for d in delays if isinstance(d, Retry)] == [1, 2, 4, 8]
    capped = next_attempt(
        attempt=10,
        status=500,
        retry_after=None,
        now=at(0),
        first_attempt_at=at(0),
        policy=POLICY.model_copy(update={"max_attempts": 50}),
        rng=Fixed(0.999999),
    )
    assert isinstance(capped, Retry)
    assert capped.at - at(0) <= timedelta(seconds=60)


def test_full_jitter_can_retry_immediately() -> None:
    assert decide(3, 500, rng=0.0) == Retry(at=at(100))


def test_jitter_spreads_retries_with_a_real_random_source() -> None:
    rng = random.Random(7)
    times = {
        next_attempt(
            attempt=4, status=503, retry_after=None, now=at(0), first_attempt_at=at(0), policy=POLICY, rng=rng
        )
        for _ in range(5)
    }
    assert len(times) == 5


def test_429_waits_exactly_retry_after_seconds() -> None:
    assert decide(1, 429, "120") == Retry(at=at(220))


def test_429_honours_an_http_date_retry_after() -> None:
    assert decide(1, 429, "Wed, 01 Jan 2025 12:05:00 GMT") == Retry(at=at(300))


def test_attempts_bound_dead_letters() -> None:
    assert isinstance(decide(5, 500), DeadLetter)


def test_retry_beyond_the_maximum_age_dead_letters() -> None:
    outcome = decide(1, 429, "7200")
    assert isinstance(outcome, DeadLetter)
    assert "maximum age" in outcome.reason


def test_unreadable_retry_after_is_ignored() -> None:
    assert parse_retry_after("soon", now=at(0)) is None
    assert parse_retry_after(None, now=at(0)) is None
    assert parse_retry_after("Wed, 01 Jan 2025 11:00:00 GMT", now=at(0)) == timedelta(0)
