"""One contract for the QuotaStore, run against the hand-written fake and the real Redis-Lua adapter."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from libs.common.redis import Keyspace, create_redis
from services.scheduler.adapters.quota_store import HeldQuota, QuotaStore, RebuildNeeded, RedisQuotaStore
from services.scheduler.adapters.quota_store_fake import FakeQuotaStore
from services.scheduler.domain.quota import QuotaLimits, QuotaUsage
from tests.integration.support import Isolation

ONE_GPU = QuotaUsage(gpus=1, units_milli=8000, workloads=1)


@pytest.fixture(params=["fake", "redis"])
async def store(request: pytest.FixtureRequest, isolation: Isolation) -> AsyncIterator[QuotaStore]:
    if request.param == "fake":
        yield FakeQuotaStore()
        return
    redis = create_redis(isolation.infra.redis_url)
    try:
        yield RedisQuotaStore(redis=redis, keys=Keyspace(isolation.redis_prefix).child("scheduler"))
    finally:
        await redis.aclose()


async def lose_data(store: QuotaStore, isolation: Isolation) -> None:
    if isinstance(store, FakeQuotaStore):
        store.lose_data()
        return
    redis = create_redis(isolation.infra.redis_url)
    try:
        await Keyspace(isolation.redis_prefix).clear(redis)
    finally:
        await redis.aclose()


async def test_quota_store_honours_the_contract(store: QuotaStore, isolation: Isolation) -> None:
    with pytest.raises(RebuildNeeded):
        await store.reserve(tenant="acme", placement_id="p0", demand=ONE_GPU)
    await store.rebuild(
        limits={"acme": QuotaLimits(gpus=2, workloads=5)}, held=[HeldQuota("acme", "p1", ONE_GPU)]
    )
    assert await store.intact()
    assert await store.usage(tenant="acme") == ONE_GPU

    assert await store.reserve(tenant="acme", placement_id="p2", demand=ONE_GPU) == ()
    assert await store.reserve(tenant="acme", placement_id="p2", demand=ONE_GPU) == (), (
        "idempotent per placement"
    )
    assert await store.reserve(tenant="acme", placement_id="p3", demand=ONE_GPU) == ("gpus",)
    assert await store.usage(tenant="acme") == QuotaUsage(gpus=2, units_milli=16000, workloads=2)

    assert await store.release(tenant="acme", placement_id="p1") is True
    assert await store.release(tenant="acme", placement_id="p1") is False, (
        "a second release gives nothing back"
    )
    assert await store.usage(tenant="acme") == ONE_GPU

    await store.set_limits(tenant="acme", limits=QuotaLimits(workloads=1))
    assert await store.reserve(tenant="acme", placement_id="p4", demand=ONE_GPU) == ("workloads",)
    assert await store.reserve(tenant="other", placement_id="p5", demand=ONE_GPU) == (), (
        "no limits = unlimited"
    )

    await lose_data(store, isolation)
    assert not await store.intact()
    with pytest.raises(RebuildNeeded):
        await store.release(tenant="acme", placement_id="p2")


async def test_batched_reserve_and_release_act_like_one_call_each_in_order(
    store: QuotaStore, isolation: Isolation
) -> None:
    with pytest.raises(RebuildNeeded):
        await store.reserve_many([("acme", "p0", ONE_GPU)])
    await store.rebuild(limits={"acme": QuotaLimits(gpus=2)}, held=[])
    assert await store.reserve_many([]) == []
    answers = await store.reserve_many(
        [("acme", "p1", ONE_GPU), ("acme", "p1", ONE_GPU), ("acme", "p2", ONE_GPU), ("acme", "p3", ONE_GPU)]
    )
    assert answers == [(), (), (), ("gpus",)], "each decision checked against the ones before it"
    assert await store.usage(tenant="acme") == QuotaUsage(gpus=2, units_milli=16000, workloads=2)
    assert await store.release_many([("acme", "p1"), ("acme", "p1"), ("acme", "p3")]) == [True, False, False]
    assert await store.usage(tenant="acme") == ONE_GPU
    await lose_data(store, isolation)
    with pytest.raises(RebuildNeeded):
        await store.release_many([("acme", "p2")])
