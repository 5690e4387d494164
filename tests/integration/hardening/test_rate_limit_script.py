"""The bucket's Lua script, on the real Redis, answers what the pure model (``ratelimit.take``) answers.

Each case puts a bucket in a state (absent, behind the clock, ahead of it, past its burst), runs the
script once at a chosen time, and compares its answer, the state it leaves and the key's expiry with
the model's. Setting the state for each case keeps the contract free of Redis's own clock and of how
long the test takes; the limiter itself, which reads Redis's clock, is checked at the end.
"""

from __future__ import annotations

import math
import random
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from libs.common.http.ratelimit import BUCKET_SCRIPT, Limit, RateLimiter, take
from libs.common.redis import Keyspace, create_redis
from tests.integration.support import Isolation

SECOND = 1_000_000
NOW = 1_750_000_000 * SECOND
LIMITS = [
    Limit("writes", rate_per_s=20, burst=100),
    Limit("reads", rate_per_s=100, burst=500),
    Limit("writes", rate_per_s=3, burst=5),
    Limit("reads", rate_per_s=0.25, burst=1),
    Limit("writes", rate_per_s=0.01, burst=1_000_000),
    Limit("reads", rate_per_s=100_000, burst=7),
]


@pytest.fixture
async def redis(isolation: Isolation) -> AsyncIterator[Redis]:
    client = create_redis(isolation.infra.redis_url)
    try:
        yield client
    finally:
        await Keyspace(isolation.redis_prefix).clear(client)
        await client.aclose()


def _states(rng: random.Random, limit: Limit) -> list[int | None]:
    """Bucket states around NOW: absent, full, part used, just full, exactly spent, spent, far ahead."""
    allowance = limit.interval_us * limit.burst
    return [
        None,
        NOW - rng.randrange(1, 10 * allowance + 2),
        NOW,
        NOW + rng.randrange(0, allowance + 1),
        NOW + allowance - limit.interval_us,
        NOW + allowance - limit.interval_us + 1,
        NOW + allowance,
        NOW + allowance + rng.randrange(1, 3 * allowance + 2),
    ]


async def _script(redis: Redis, key: str, limit: Limit, now_us: int) -> tuple[bool, int, int]:
    return (await _script_then_key(redis, key, limit, now_us))[0]


async def _script_then_key(
    redis: Redis, key: str, limit: Limit, now_us: int
) -> tuple[tuple[bool, int, int], int | None, int]:
    """The script's answer, then the key's value and expiry (ms), read in the same MULTI: a key that
    expires a millisecond later is read before it does."""
    async with redis.pipeline(transaction=True) as pipe:
        pipe.eval(BUCKET_SCRIPT, 1, key, limit.interval_us, limit.burst, now_us)
        pipe.get(key)
        pipe.pttl(key)
        raw, stored, ttl_ms = await pipe.execute()
    allowed, remaining, retry_after_us = (int(v) for v in raw)
    return (bool(allowed), remaining, retry_after_us), None if stored is None else int(stored), int(ttl_ms)


@pytest.mark.parametrize("limit", LIMITS, ids=lambda limit: f"{limit.rate_per_s:g}/s+{limit.burst}")
async def test_the_script_answers_and_leaves_what_the_model_does(
    redis: Redis, isolation: Isolation, limit: Limit
) -> None:
    rng = random.Random(f"{limit.rate_per_s}-{limit.burst}")
    key = Keyspace(isolation.redis_prefix).key("bucket")
    cases = 0
    for _ in range(25):
        for state in _states(rng, limit):
            if state is None:
                await redis.delete(key)
            else:
                await redis.set(key, str(state), px=3_600_000)
            expected, after = take(tat_us=state, now_us=NOW, limit=limit)
            answer, stored, ttl_ms = await _script_then_key(redis, key, limit, NOW)
            assert answer == (expected.allowed, expected.remaining, expected.retry_after_us), (state, limit)
            assert stored == (after if expected.allowed else state)
            if expected.allowed:
                assert 0 <= ttl_ms <= math.ceil((after - NOW) / 1000), "it expires once it is full again"
            else:
                assert 3_000_000 < ttl_ms <= 3_600_000, "a refusal leaves the key as it was"
            cases += 1
    assert cases == 25 * 8


async def test_a_run_of_requests_through_the_script_follows_the_model_step_by_step(
    redis: Redis, isolation: Isolation
) -> None:
    limit = Limit("writes", rate_per_s=0.05, burst=4)  # 20 s a token: Redis's own expiry never interferes
    key = Keyspace(isolation.redis_prefix).key("run")
    rng = random.Random(7)
    now, state = NOW, None
    for _ in range(300):
        now += rng.choice([0, 0, 1, limit.interval_us // 3, limit.interval_us, -5 * SECOND])
        expected, state = take(tat_us=state, now_us=now, limit=limit)
        answer = await _script(redis, key, limit, now)
        assert answer == (expected.allowed, expected.remaining, expected.retry_after_us)


async def test_the_limiter_uses_redis_time_and_refuses_past_the_burst(
    redis: Redis, isolation: Isolation
) -> None:
    slow = Limit("writes", rate_per_s=0.1, burst=5)  # 10 s a token: the test never waits one out
    limiter = RateLimiter(
        service="svc",
        keys=Keyspace(isolation.redis_prefix).child("svc"),
        writes=slow,
        reads=Limit("reads", rate_per_s=0.1, burst=1),
        redis=lambda: redis,
    )
    answers = [await limiter.check(tenant="acme", method="POST") for _ in range(6)]
    assert [a.allowed for a in answers if a is not None] == [True] * 5 + [False]
    refused = answers[-1]
    assert refused is not None
    assert 0 < refused.retry_after_us <= slow.interval_us
    assert refused.retry_after_s == math.ceil(refused.retry_after_us / SECOND)
    other = await limiter.check(tenant="globex", method="POST")
    reads = await limiter.check(tenant="acme", method="GET")
    assert other is not None
    assert other.allowed, "another tenant has its own bucket"
    assert reads is not None
    assert reads.allowed, "reads have their own bucket"
    assert await redis.exists(limiter.key("acme", slow)) == 1
