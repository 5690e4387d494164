"""Readiness names a consumer that has not applied events for longer than the bound, until it does."""

from __future__ import annotations

from typing import Any, ClassVar, Self

import httpx

from libs.common.bus import HandlerContext, Handlers
from libs.common.db import PostgresUnitOfWork
from libs.common.db.migrate import PLATFORM_MIGRATIONS, discover
from libs.common.events import envelop, topics
from libs.common.events.platform import TenantCreatedV1
from libs.common.http import create_service_app
from libs.common.runtime import ConsumerSpec, ServiceRuntime
from libs.common.settings import BaseServiceSettings
from tests.integration.bus_fixtures import publish
from tests.integration.support import Isolation, eventually, running


class _Settings(BaseServiceSettings):
    """A service whose consumers may fail for one second before readiness says so."""

    consumer_stall_s: float = 1.0


class _FlakyUnitOfWork(PostgresUnitOfWork):
    """A unit of work whose database refuses every transaction while ``broken``."""

    broken: ClassVar[bool] = True

    async def __aenter__(self) -> Self:
        if type(self).broken:
            raise ConnectionRefusedError("the database refuses connections")
        return await super().__aenter__()


async def _apply(event: TenantCreatedV1, ctx: HandlerContext[None, Any]) -> None:
    await ctx.uow.conn.execute("SELECT 1")


async def _readiness(client: httpx.AsyncClient) -> tuple[int, dict[str, str]]:
    response = await client.get("/readyz")
    return response.status_code, response.json()["checks"]


async def test_readiness_names_a_consumer_that_cannot_apply_and_is_ready_again_once_it_applies(
    isolation: Isolation,
) -> None:
    settings = isolation.settings(
        _Settings, "flaky", service_name="flaky", consumer_max_attempts=2, consumer_backoff_s=0.01
    )
    handlers = Handlers(None, uow=_FlakyUnitOfWork).on(TenantCreatedV1, _apply)
    runtime = ServiceRuntime(
        settings=settings,
        migrations=discover(PLATFORM_MIGRATIONS, label="platform"),
        consumers=[ConsumerSpec("tenants", (topics.PLATFORM,), handlers)],
    )
    app = create_service_app(runtime=runtime, title="flaky", description="a consumer that cannot apply")
    _FlakyUnitOfWork.broken = True
    async with running(app) as client:
        assert (await _readiness(client))[0] == 200
        await publish(isolation, [envelop(TenantCreatedV1(tenant_id="t-1", name="T"), source="test")])

        async def stalled() -> dict[str, str] | None:
            status, checks = await _readiness(client)
            return checks if status == 503 else None

        checks = await eventually(stalled, timeout=30, what="readiness to report the stalled consumer")
        assert checks["consumer:tenants"].startswith("not applying events for ")
        assert "the database refuses connections" in checks["consumer:tenants"]
        assert {checks["postgres"], checks["redis"], checks["kafka"]} == {"ok"}

        _FlakyUnitOfWork.broken = False

        async def ready() -> bool:
            return (await _readiness(client))[0] == 200

        await eventually(ready, timeout=30, interval=0.2, what="ready again once the consumer applies")
        assert "consumer:tenants" not in (await _readiness(client))[1]
