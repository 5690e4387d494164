"""A service whose database refuses connections at start-up waits for it (logging each attempt) and becomes
ready once the database answers, instead of exiting with "Application startup failed"."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from libs.common.db.pool import retry_while_unreachable
from libs.devkit.broker import free_port
from services.billing.app import create_app
from services.billing.settings import BillingSettings
from tests.integration.support import Isolation, running


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


@contextlib.asynccontextmanager
async def _proxy_opening_late(*, port: int, target: tuple[str, int], after_s: float) -> AsyncIterator[None]:
    """Nothing listens on ``port`` for ``after_s``; then every connection there is forwarded to ``target``."""
    pipes: set[asyncio.Task[None]] = set()

    async def forward(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection(*target)
        for task in (_pipe(reader, upstream_writer), _pipe(upstream_reader, writer)):
            pipes.add(asyncio.create_task(task))

    async def open_late() -> asyncio.Server:
        await asyncio.sleep(after_s)
        return await asyncio.start_server(forward, "127.0.0.1", port)

    opening = asyncio.create_task(open_late())
    try:
        yield
    finally:
        server = await opening
        server.close()
        for task in pipes:
            task.cancel()
        await asyncio.gather(*pipes, return_exceptions=True)


async def test_a_service_started_before_its_database_retries_and_becomes_ready(
    isolation: Isolation, caplog: pytest.LogCaptureFixture
) -> None:
    real = urlsplit(isolation.infra.database_url)
    port = free_port()
    userinfo, at, _ = real.netloc.rpartition("@")
    late = urlunsplit(real._replace(netloc=f"{userinfo}{at}127.0.0.1:{port}"))
    assert late != isolation.infra.database_url
    settings = isolation.settings(BillingSettings, "billing", database_url=late, startup_connect_timeout_s=60)
    caplog.set_level(logging.WARNING, logger="libs.common.db.pool")
    async with (
        _proxy_opening_late(port=port, target=(real.hostname or "127.0.0.1", real.port or 5432), after_s=2.0),
        running(create_app(settings)) as client,
    ):
        readyz = await client.get("/readyz")
        assert readyz.status_code == 200, readyz.text
    attempts = [r.getMessage() for r in caplog.records if r.name == "libs.common.db.pool"]
    assert attempts, "the database was reachable at once: the test did not exercise a refusal"
    assert attempts[0].startswith("Postgres unreachable (attempt 1: ConnectionRefusedError"), attempts[0]
    assert "retrying in 0.5s" in attempts[0]


async def test_a_refusal_that_outlasts_the_wait_is_raised_and_a_wrong_password_is_not_retried() -> None:
    calls: list[str] = []

    async def refused() -> None:
        calls.append("refused")
        raise ConnectionRefusedError(111, "Connect call failed")

    with pytest.raises(ConnectionRefusedError):
        await retry_while_unreachable(refused, what="Postgres", timeout_s=0.3, first_delay_s=0.1)
    assert len(calls) >= 2  # retried, and then gave up with the refusal itself

    async def wrong_password() -> None:
        calls.append("password")
        raise asyncpg.InvalidPasswordError("password authentication failed")

    with pytest.raises(asyncpg.InvalidPasswordError):
        await retry_while_unreachable(wrong_password, what="Postgres", timeout_s=60)
    assert calls.count("password") == 1
