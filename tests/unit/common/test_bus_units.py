from __future__ import annotations

import random

import pytest

from libs.common.bus import RetryPolicy
from libs.common.events.platform import TenantCreatedV1
from libs.common.redis import Keyspace
from libs.common.testing import FakeUnitOfWork


def test_retry_delays_grow_and_stay_under_the_cap() -> None:
    policy = RetryPolicy(max_attempts=8, base_s=0.1, max_s=1.0)
    rng = random.Random(7)
    ceilings = [min(1.0, 0.1 * 2 ** (a - 1)) for a in range(1, 9)]
    for attempt, ceiling in enumerate(ceilings, start=1):
        delays = [policy.delay(attempt, rng) for _ in range(200)]
        assert all(0 <= d <= ceiling for d in delays)
        assert max(delays) > ceiling * 0.8  # full jitter reaches near the ceiling


def test_keyspace_builds_prefixed_keys_and_refuses_a_bad_prefix() -> None:
    keys = Keyspace("gpucloud:").child("scheduler")
    assert keys.key("quota", "acme") == "gpucloud:scheduler:quota:acme"
    with pytest.raises(ValueError, match="end with ':'"):
        Keyspace("gpucloud")


async def test_fake_unit_of_work_keeps_only_committed_events() -> None:
    uow = FakeUnitOfWork()
    async with uow:
        await uow.emit(TenantCreatedV1(tenant_id="a1", name="A"))
    async with uow:
        await uow.emit(TenantCreatedV1(tenant_id="b1", name="B"))
        await uow.commit()
    assert [e.tenant_id for e in uow.events] == ["b1"]  # type: ignore[attr-defined]
