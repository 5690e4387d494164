"""A database that stops answering gives callers a 503 in the error shape with Retry-After, then recovers.

The service reaches Postgres through a small TCP relay the test controls: closing the relay cuts every
pooled connection and refuses new ones, as a database restart or a network cut would.
"""

from __future__ import annotations

import asyncio
import contextlib
from urllib.parse import urlsplit, urlunsplit

import httpx

from services.billing.app import create_app
from services.billing.settings import BillingSettings
from tests.integration.support import ADMIN_HEADERS, Isolation, eventually, running


class _Relay:
    """Forwards TCP connections on a local port to Postgres until stopped (and again once restarted)."""

    def __init__(self, *, host: str, port: int) -> None:
        self._target = (host, port)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection(*self._target)
        self._writers |= {writer, upstream_writer}
        await asyncio.gather(
            self._pipe(reader, upstream_writer), self._pipe(upstream_reader, writer), return_exceptions=True
        )

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        finally:
            self._writers.discard(writer)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


def _through(url: str, port: int) -> str:
    parts = urlsplit(url)
    credentials = parts.netloc.rpartition("@")[0]
    netloc = f"{credentials}@127.0.0.1:{port}" if credentials else f"127.0.0.1:{port}"
    return urlunsplit(parts._replace(netloc=netloc))


async def _status(client: httpx.AsyncClient) -> int:
    response = await client.get("/v1/budgets?tenant_id=acme", headers=ADMIN_HEADERS)
    return response.status_code


async def test_a_database_that_stops_answering_gives_503_with_retry_after_then_recovers(
    isolation: Isolation,
) -> None:
    target = urlsplit(isolation.infra.database_url)
    relay = _Relay(host=target.hostname or "127.0.0.1", port=target.port or 5432)
    await relay.start()
    settings = isolation.settings(
        BillingSettings,
        "billing",
        accrual_interval_s=3600,
        database_url=_through(isolation.infra.database_url, relay.port),
    )
    async with running(create_app(settings)) as client:
        assert await _status(client) == 200
        await relay.stop()

        response = await client.get("/v1/budgets?tenant_id=acme", headers=ADMIN_HEADERS)
        assert response.status_code == 503, response.text
        assert response.headers["retry-after"] == "2"
        error = response.json()["error"]
        assert error["status"] == 503
        assert error["code"] == "service_unavailable"
        assert "retry" in error["message"]

        await relay.start()  # the same port: the pool's next connect reaches Postgres again
        await eventually(lambda: _is_ok(client), timeout=20, what="billing answering again")


async def _is_ok(client: httpx.AsyncClient) -> bool:
    return await _status(client) == 200
