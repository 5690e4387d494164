"""The rate limit as every service's app enforces it: 429 with Retry-After, per tenant and class, admin
exempt, unauthenticated requests not counted, and Redis unreachable letting requests through.

The app is never started: tenants' keys are put in its key cache, and Redis is a fake that runs the
bucket's pure model (the contract test in tests/integration/hardening holds the Lua script to the model).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, cast

import httpx
import pytest
from fastapi import APIRouter, FastAPI
from fastapi.routing import APIRoute, iter_route_contexts
from prometheus_client import REGISTRY
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError

from libs.common.auth import Admin, Caller, hash_key
from libs.common.auth.principal import Principal, require_admin
from libs.common.http import ratelimit
from libs.common.http.app import create_service_app
from libs.common.http.ratelimit import Limit, RateLimiter, take
from libs.common.redis import Keyspace
from libs.common.runtime import ServiceRuntime
from libs.common.settings import BaseServiceSettings
from services.alerting.app import create_app as alerting
from services.billing.app import create_app as billing
from services.inventory.app import create_app as inventory
from services.recovery.app import create_app as recovery
from services.scheduler.app import create_app as scheduler
from services.telemetry.app import create_app as telemetry

ACME = {"X-API-Key": "acme-secret-key"}
GLOBEX = {"X-API-Key": "globex-secret-key"}
SECOND = 1_000_000


@dataclass
class FakeBucketRedis:
    """Answers the bucket script's EVALSHA with the pure model on a fake clock (µs)."""

    now_us: int = 1_700_000_000 * SECOND
    buckets: dict[str, int] = field(default_factory=dict)
    loaded: bool = False
    calls: list[str] = field(default_factory=list)
    error: Exception | None = None
    hang: bool = False

    async def evalsha(self, sha: str, numkeys: int, key: str, interval_us: int, burst: int) -> list[int]:
        self.calls.append("evalsha")
        if self.hang:
            await asyncio.Event().wait()
        if self.error is not None:
            raise self.error
        if not self.loaded:
            raise NoScriptError("NOSCRIPT No matching script.")
        limit = Limit("writes", rate_per_s=SECOND / interval_us, burst=burst)
        decision, self.buckets[key] = take(tat_us=self.buckets.get(key), now_us=self.now_us, limit=limit)
        return [int(decision.allowed), decision.remaining, decision.retry_after_us]

    async def script_load(self, script: str) -> str:
        self.calls.append("script_load")
        self.loaded = True
        return "sha"


@dataclass
class Clock:
    now: float = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Api:
    app: FastAPI
    client: httpx.AsyncClient
    redis: FakeBucketRedis
    clock: Clock
    served: list[str]
    admin: dict[str, str]

    async def post(self, headers: dict[str, str] | None = ACME, body: Any = None) -> httpx.Response:
        return await self.client.post("/v1/things", json={"n": 1} if body is None else body, headers=headers)

    async def get(self, headers: dict[str, str] = ACME, path: str = "/v1/things") -> httpx.Response:
        return await self.client.get(path, headers=headers)

    async def posts(self, times: int, headers: dict[str, str] | None = ACME, body: Any = None) -> list[int]:
        return [(await self.post(headers, body)).status_code for _ in range(times)]

    async def gets(self, times: int, headers: dict[str, str] = ACME, path: str = "/v1/things") -> list[int]:
        return [(await self.get(headers, path)).status_code for _ in range(times)]


def _app(served: list[str], **limits: Any) -> FastAPI:
    router = APIRouter()

    @router.get("/v1/things")
    async def list_things(caller: Caller) -> dict[str, str]:
        served.append(f"GET {caller.tenant_id}")
        return {}

    @router.post("/v1/things")
    async def create_thing(caller: Caller, body: dict[str, int]) -> dict[str, str]:
        served.append(f"POST {caller.tenant_id}")
        return {}

    @router.post("/v1/admin/things")
    async def admin_thing(_: Admin) -> dict[str, str]:
        served.append("POST admin")
        return {}

    settings = BaseServiceSettings(service_name="svc", **limits)
    runtime = ServiceRuntime(settings=settings)
    for tenant, headers in (("acme", ACME), ("globex", GLOBEX)):
        principal = Principal(key_id=f"k-{tenant}", role="tenant", tenant_id=tenant)
        runtime.key_cache.put(hash_key(headers["X-API-Key"]), principal)
    return create_service_app(runtime=runtime, title="svc", description="test", routers=[router])


@pytest.fixture
async def api() -> AsyncIterator[Api]:
    served: list[str] = []
    app = _app(
        served,
        rate_limit_write_per_s=1,
        rate_limit_write_burst=2,
        rate_limit_read_per_s=1,
        rate_limit_read_burst=3,
    )
    redis, clock = FakeBucketRedis(), Clock()
    installed: RateLimiter = app.state.rate_limiter
    app.state.rate_limiter = RateLimiter(
        service="svc",
        keys=Keyspace("test:").child("svc"),
        writes=installed.writes,
        reads=installed.reads,
        redis=lambda: cast(Redis, redis),
        clock=clock,
    )
    admin = {"X-API-Key": app.state.runtime.settings.admin_key}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://svc") as client:
        yield Api(app=app, client=client, redis=redis, clock=clock, served=served, admin=admin)


async def test_a_tenant_over_its_write_burst_gets_429_naming_the_limit_with_retry_after(api: Api) -> None:
    assert await api.posts(2) == [200, 200]
    refused = await api.post()
    assert refused.status_code == 429
    assert refused.headers["Retry-After"] == "1"
    error = refused.json()["error"]
    assert (error["status"], error["code"], error["field"]) == (429, "rate_limited", None)
    assert error["message"] == (
        "rate limit exceeded: tenant 'acme' may send 1 write requests a second to svc (bursts of 2); "
        "retry in 1 s"
    )
    assert error["details"] == {"limit": "writes", "rate_per_s": 1.0, "burst": 2, "retry_after_s": 1}
    assert api.served == ["POST acme", "POST acme"], "a refused request never reaches the route"


async def test_the_limit_is_checked_before_the_body_is_validated(api: Api) -> None:
    assert await api.posts(3, body={"n": "not a number"}) == [422, 422, 429]


async def test_after_waiting_retry_after_the_tenant_is_served_again(api: Api) -> None:
    assert await api.posts(3) == [200, 200, 429]
    api.redis.now_us += int((await api.post()).headers["Retry-After"]) * SECOND
    assert await api.posts(2) == [200, 429]


async def test_reads_and_writes_are_separate_buckets(api: Api) -> None:
    assert await api.posts(3) == [200, 200, 429]
    assert await api.gets(4) == [200, 200, 200, 429]
    assert (await api.get()).json()["error"]["details"]["limit"] == "reads"


async def test_one_tenants_flood_never_refuses_another_tenant(api: Api) -> None:
    assert (await api.posts(50, ACME)).count(200) == 2
    assert await api.posts(2, GLOBEX) == [200, 200]
    assert set(api.redis.buckets) == {"test:svc:acme:writes", "test:svc:globex:writes"}


async def test_the_admin_key_is_exempt_and_costs_no_redis_call(api: Api) -> None:
    assert set(await api.posts(10, api.admin)) == {200}
    admin_only = [
        (await api.client.post("/v1/admin/things", headers=api.admin)).status_code for _ in range(10)
    ]
    assert set(admin_only) == {200}
    assert api.redis.calls == []


async def test_requests_without_a_key_and_public_routes_are_not_counted(api: Api) -> None:
    assert set(await api.posts(5, headers=None)) == {401}
    assert set(await api.gets(5, path="/healthz")) == {200}
    assert api.redis.calls == []


async def test_the_script_is_loaded_only_when_redis_does_not_know_it(api: Api) -> None:
    assert await api.gets(3) == [200, 200, 200]
    assert api.redis.calls == ["evalsha", "script_load", "evalsha", "evalsha", "evalsha"]


async def test_redis_unreachable_lets_requests_through_warning_once_a_minute(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    api.redis.error = RedisConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
    let_through = _fail_open_count()
    with caplog.at_level(logging.WARNING, logger=ratelimit.__name__):
        assert set(await api.posts(10)) == {200}
        api.clock.now += 59
        assert (await api.post()).status_code == 200
        assert len(caplog.records) == 1
        api.clock.now += 2
        assert (await api.post()).status_code == 200
    first, second = (r.getMessage() for r in caplog.records)
    assert "Redis could not be asked (ConnectionError: Error 111" in first
    assert second.endswith("11 request(s) let through unchecked since the last warning")
    assert _fail_open_count() - let_through == 12


async def test_redis_hanging_lets_requests_through_after_the_timeout(api: Api) -> None:
    hanging = FakeBucketRedis(hang=True)
    app_limiter: RateLimiter = api.app.state.rate_limiter
    api.app.state.rate_limiter = RateLimiter(
        service="svc",
        keys=Keyspace("test:"),
        writes=app_limiter.writes,
        reads=app_limiter.reads,
        redis=lambda: cast(Redis, hanging),
        timeout_s=0.01,
    )
    let_through = _fail_open_count()
    assert (await api.get()).status_code == 200
    assert hanging.calls == ["evalsha"]
    assert _fail_open_count() - let_through == 1


async def test_a_class_with_rate_zero_is_never_checked() -> None:
    app = _app([], rate_limit_read_per_s=0)
    redis = FakeBucketRedis(loaded=True)
    app.state.rate_limiter = RateLimiter(
        service="svc",
        keys=Keyspace("test:"),
        writes=Limit("writes", 1, 1),
        reads=Limit("reads", 0, 1),
        redis=lambda: cast(Redis, redis),
    )
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://svc") as client:
        assert {(await client.get("/v1/things", headers=ACME)).status_code for _ in range(20)} == {200}
    assert redis.calls == []


def _fail_open_count() -> float:
    value = REGISTRY.get_sample_value("gpucloud_rate_limit_fail_open_total", {"service": "svc"})
    return value or 0.0


def _admin_only(app: FastAPI) -> set[tuple[str, str]]:
    """(method, path) of the operations only the admin key may call (their routes depend on Admin)."""
    found = set()
    for route in iter_route_contexts(app.routes):
        if not isinstance(route.original_route, APIRoute):
            continue
        pending, calls = [route.dependant], set()
        while pending:
            current = pending.pop()
            calls.add(current.call)
            pending.extend(current.dependencies)
        if require_admin in calls:
            found |= {(m.lower(), str(route.path_format)) for m in route.methods or ()}
    return found


@pytest.mark.parametrize("build", [alerting, billing, inventory, recovery, scheduler, telemetry])
def test_every_operation_a_tenant_may_call_documents_the_429_and_its_retry_after(
    build: Callable[[], FastAPI],
) -> None:
    app = build()
    admin_only = _admin_only(app)
    tenant_operations = 0
    for path, item in app.openapi()["paths"].items():
        for method, operation in item.items():
            responses = operation["responses"]
            if "security" not in operation or (method, path) in admin_only:
                assert "rate limit" not in str(responses.get("429", "")), f"{method} {path}"
                continue
            tenant_operations += 1
            documented = responses["429"]
            assert "rate limit" in documented["description"], f"{method} {path}"
            assert documented["content"]["application/json"]["schema"] == {
                "$ref": "#/components/schemas/ErrorBody"
            }
            assert documented["headers"]["Retry-After"]["schema"] == {"type": "integer"}
    assert tenant_operations > 0
