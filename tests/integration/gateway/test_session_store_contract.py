"""RedisSessionStore and its in-memory twin keep the same contract: put, get, delete, expire."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from libs.common.redis import Keyspace, create_redis
from services.gateway.adapters.session_store import RedisSessionStore
from services.gateway.adapters.session_store_fake import FakeSessionStore
from services.gateway.domain.session import Session, token_digest
from services.gateway.service.sessions import SessionStore
from tests.integration.support import Isolation, eventually

pytestmark = pytest.mark.integration

SESSION = Session(
    api_key="k" * 20,
    key_id="k1",
    tenant_id="acme",
    role="tenant",
    csrf_token="c" * 20,
    expires_at=datetime(2030, 1, 1, tzinfo=UTC) + timedelta(hours=8),
)


@pytest.fixture(params=["fake", "redis"])
async def store(request: pytest.FixtureRequest, isolation: Isolation) -> AsyncIterator[SessionStore]:
    if request.param == "fake":
        yield FakeSessionStore()
        return
    client = create_redis(isolation.infra.redis_url)
    try:
        yield RedisSessionStore(redis=client, keys=Keyspace(isolation.redis_prefix).child("gateway"))
    finally:
        await client.aclose()


async def test_a_stored_session_comes_back_until_deleted(store: SessionStore) -> None:
    digest = token_digest("cookie-token")
    assert await store.get(digest) is None
    await store.put(digest, SESSION, ttl_s=60)
    assert await store.get(digest) == SESSION
    assert await store.get(token_digest("another")) is None
    await store.delete(digest)
    assert await store.get(digest) is None
    await store.delete(digest)  # deleting twice is fine


async def test_a_session_is_forgotten_when_its_ttl_ends(store: SessionStore) -> None:
    digest = token_digest("short")
    await store.put(digest, SESSION, ttl_s=1)
    assert await store.get(digest) == SESSION

    async def gone() -> bool:
        return await store.get(digest) is None

    await eventually(gone, timeout=4, interval=0.1, what="the session to expire")


async def test_the_redis_store_keeps_neither_the_cookie_nor_an_unbounded_key(isolation: Isolation) -> None:
    client = create_redis(isolation.infra.redis_url)
    try:
        keys = Keyspace(isolation.redis_prefix).child("gateway")
        await RedisSessionStore(redis=client, keys=keys).put(token_digest("secret-cookie"), SESSION, ttl_s=30)
        names = [k async for k in client.scan_iter(match=f"{keys.prefix}*")]
        assert names == [keys.key(token_digest("secret-cookie")).encode()]
        assert b"secret-cookie" not in names[0]
        assert 0 < await client.ttl(names[0]) <= 30
    finally:
        await client.aclose()
