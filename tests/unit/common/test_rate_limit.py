"""The token bucket's arithmetic (the pure model the Lua script mirrors), on a fake clock: no Redis."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from pydantic import ValidationError

from libs.common.http.ratelimit import Decision, Limit, take
from libs.common.settings import BaseServiceSettings

WRITES = Limit("writes", rate_per_s=20, burst=100)
SECOND = 1_000_000


@dataclass
class Bucket:
    """One bucket and a fake clock (µs), as Redis would hold and read them."""

    limit: Limit
    now_us: int = 1_700_000_000 * SECOND
    tat_us: int | None = None

    def take(self) -> Decision:
        decision, self.tat_us = take(tat_us=self.tat_us, now_us=self.now_us, limit=self.limit)
        return decision

    def wait(self, us: int) -> None:
        self.now_us += us


def test_a_full_bucket_lets_the_burst_through_at_once_then_refuses() -> None:
    bucket = Bucket(WRITES)
    answers = [bucket.take() for _ in range(100)]
    assert all(a.allowed for a in answers)
    assert [a.remaining for a in answers[:3]] == [99, 98, 97]
    assert answers[-1].remaining == 0
    refused = bucket.take()
    assert refused == Decision(allowed=False, remaining=0, retry_after_us=50_000)
    assert refused.retry_after_s == 1


def test_a_refusal_takes_nothing_and_waiting_its_retry_after_is_enough() -> None:
    bucket = Bucket(WRITES)
    for _ in range(100):
        bucket.take()
    before = bucket.tat_us
    refused = bucket.take()
    assert bucket.tat_us == before
    bucket.wait(refused.retry_after_us - 1)
    assert not bucket.take().allowed
    bucket.wait(1)
    assert bucket.take().allowed
    assert not bucket.take().allowed


def test_tokens_come_back_at_the_rate_and_never_past_the_burst() -> None:
    bucket = Bucket(WRITES)
    for _ in range(100):
        bucket.take()
    bucket.wait(SECOND)  # 20 tokens back
    assert sum(bucket.take().allowed for _ in range(25)) == 20
    bucket.wait(3600 * SECOND)  # an hour idle: a full bucket, not 72,000 tokens
    assert sum(bucket.take().allowed for _ in range(150)) == 100


def test_a_flood_is_cut_to_the_burst_plus_the_rate_over_its_length() -> None:
    bucket = Bucket(WRITES)
    allowed = 0
    for _ in range(2000):  # 2,000 requests 3.4 ms apart: 6.7966 s from the first to the last
        allowed += bucket.take().allowed
        bucket.wait(3400)
    assert allowed == 100 + 1999 * 3400 // 50_000  # the burst, and a token per 50 ms since the first


def test_retry_after_is_whole_seconds_rounded_up() -> None:
    assert Decision(allowed=False, remaining=0, retry_after_us=1).retry_after_s == 1
    assert Decision(allowed=False, remaining=0, retry_after_us=SECOND).retry_after_s == 1
    assert Decision(allowed=False, remaining=0, retry_after_us=SECOND + 1).retry_after_s == 2
    slow = Bucket(Limit("writes", rate_per_s=0.25, burst=1))
    assert slow.take().allowed
    assert slow.take().retry_after_s == 4


def test_the_clock_going_back_never_gives_tokens_away() -> None:
    bucket = Bucket(Limit("reads", rate_per_s=1, burst=2))
    assert bucket.take().allowed
    assert bucket.take().allowed
    bucket.wait(-10 * SECOND)  # another replica's clock, or a step back
    assert not bucket.take().allowed


def test_rates_become_whole_microseconds_per_token_and_zero_turns_a_class_off() -> None:
    assert Limit("reads", rate_per_s=100, burst=500).interval_us == 10_000
    assert Limit("reads", rate_per_s=3, burst=5).interval_us == 333_333
    assert Limit("writes", rate_per_s=0.01, burst=1).interval_us == 100 * SECOND
    assert not Limit("writes", rate_per_s=0, burst=100).enabled
    assert WRITES.enabled


def test_settings_default_to_sane_limits_and_refuse_nonsense() -> None:
    settings = BaseServiceSettings()
    assert (settings.rate_limit_write_per_s, settings.rate_limit_write_burst) == (20, 100)
    assert (settings.rate_limit_read_per_s, settings.rate_limit_read_burst) == (100, 500)
    assert BaseServiceSettings(rate_limit_write_per_s=0).rate_limit_write_per_s == 0
    with pytest.raises(ValidationError, match=r"0 \(off\) or at least 0\.01"):
        BaseServiceSettings(rate_limit_read_per_s=0.001)
    with pytest.raises(ValidationError, match="rate_limit_write_burst"):
        BaseServiceSettings(rate_limit_write_burst=0)
    with pytest.raises(ValidationError, match="rate_limit_write_per_s"):
        BaseServiceSettings(rate_limit_write_per_s=-1)


def test_the_limits_are_read_from_their_shared_environment_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RATE_LIMIT_WRITE_PER_S", "5")
    monkeypatch.setenv("RATE_LIMIT_READ_BURST", "50")
    settings = BaseServiceSettings()
    assert (settings.rate_limit_write_per_s, settings.rate_limit_read_burst) == (5, 50)
