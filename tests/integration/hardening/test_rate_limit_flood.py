"""One tenant's flood is cut to its burst and rate, and never slows or refuses another tenant.

One tenant once created 2,000 drafts in 6.8 s. Here the running scheduler (its real Redis and Postgres)
takes 2,000 draft creations from one tenant, as fast as 32 connections send them, with a second tenant's
requests interleaved: the first gets its burst plus the rate over the flood's length and 429s carrying
Retry-After for the rest (no draft behind any of them), the second gets every request served, and after
waiting Retry-After the first is served again.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable

import asyncpg
import httpx

from services.scheduler.app import create_app
from tests.integration.scheduler.helpers import create_tenant, settings
from tests.integration.support import Isolation, running

RATE, BURST = 20.0, 100
FLOOD, EVERY = 2000, 50  # the second tenant sends one request per 50 of the flood's
DRAFT = {"options": {"urgency": 0.5}}


async def _drafts(iso: Isolation, tenant: str) -> int:
    conn = await asyncpg.connect(iso.infra.database_url)
    try:
        query = f'SELECT count(*) FROM "{iso.schema("scheduler")}".drafts WHERE tenant_id = $1'
        value: int = await conn.fetchval(query, tenant)
        return value
    finally:
        await conn.close()


async def _in_parallel(jobs: list[Callable[[], Awaitable[None]]], *, connections: int) -> None:
    """Run the jobs in order, at most ``connections`` at a time."""
    pending = iter(jobs)

    async def worker() -> None:
        for job in pending:
            await job()

    await asyncio.gather(*(worker() for _ in range(connections)))


async def test_one_tenants_flood_of_drafts_is_cut_to_burst_and_rate_while_another_is_served(
    isolation: Isolation,
) -> None:
    app = create_app(settings(isolation, rate_limit_write_per_s=RATE, rate_limit_write_burst=BURST))
    async with running(app) as client:
        acme, globex = await create_tenant(client, "acme"), await create_tenant(client, "globex")
        flood: list[httpx.Response] = []
        other: list[httpx.Response] = []

        def sender(headers: dict[str, str], into: list[httpx.Response]) -> Callable[[], Awaitable[None]]:
            async def send() -> None:
                into.append(await client.post("/v1/workloads/drafts", json=DRAFT, headers=headers))

            return send

        jobs = []
        for i in range(FLOOD):
            jobs.append(sender(acme, flood))
            if i % EVERY == 0:
                jobs.append(sender(globex, other))
        started = time.monotonic()
        await _in_parallel(jobs, connections=32)
        elapsed = time.monotonic() - started

        statuses = [r.status_code for r in flood]
        accepted, refused = statuses.count(201), [r for r in flood if r.status_code == 429]
        print(f"flood: {accepted} of {FLOOD} accepted in {elapsed:.2f} s, {len(other)} of the other's served")
        assert accepted + len(refused) == FLOOD, sorted(set(statuses))
        assert BURST <= accepted <= BURST + math.ceil(RATE * elapsed) + 1, (accepted, elapsed)
        for response in refused:
            assert int(response.headers["Retry-After"]) >= 1
            error = response.json()["error"]
            assert error["code"] == "rate_limited"
            assert "tenant 'acme' may send 20 write requests a second" in error["message"]
            assert "(bursts of 100)" in error["message"]
        assert [r.status_code for r in other] == [201] * len(other), [r.text for r in other if r.is_error]
        assert len(other) == FLOOD // EVERY
        assert await _drafts(isolation, "acme") == accepted, "a refused request creates nothing"

        await asyncio.sleep(int(refused[-1].headers["Retry-After"]))  # what the last refusal asked
        served = await client.post("/v1/workloads/drafts", json=DRAFT, headers=acme)
        assert served.status_code == 201, served.text
