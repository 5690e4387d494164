"""Rate limit bench: what the per-tenant limit costs a request, and whether a tenant's flood reaches another.

Runs the real scheduler app in this process (its lifespan: migrations, pools, consumers; no placer) on
the embedded broker, local Postgres and Redis, in a throw-away schema, topic prefix and Redis prefix,
driven through an in-process ASGI client (no network: what is measured is the service's own work).
Two tenants; requests are GET /v1/workloads (a read) and POST /v1/workloads/drafts (a write).

Method:
- Redis round trips per request: every command the service's Redis client sends is counted (its
  ``execute_command``, which each command, an EVALSHA included, goes through once: one request and one
  reply on a connection) over ``ROUNDS`` requests, with the limiter on (limits too high to refuse) and
  with it off (both classes at rate 0, so no check), in alternating blocks on the same warm app. The
  figure is the difference per request, reads and writes apart. Target: 1.
- Latency: p50 and p99 of the same requests, on and off; the difference of the p50s is the limiter's
  cost per request (EVALSHA on the local Redis, plus the second key-cache lookup).
- Limiter check alone: p50 and p99 of ``RateLimiter.check`` called directly (the EVALSHA and its reply).
- Isolation: with the default limits (writes 20/s, burst 100), one tenant sends ``FLOOD`` drafts in
  ``FLOOD_S`` seconds, open loop (the issue's flood), while the other sends one per 50 of them at an even
  pace; reported: the flooding tenant's accepted count against its burst + rate over the flood, and the
  other's served fraction (target 1) and latency, against the same requests sent alone. The client runs
  in the service's process, so the flood's own client work is part of what the other tenant waits for.
Prints one JSON object per result line (bench "api.rate_limit").
"""

from __future__ import annotations

import asyncio
import math
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import BenchEnv, emit, log, percentile
from libs.common.http.ratelimit import Limit, RateLimiter
from libs.common.redis import Keyspace
from libs.common.settings import DEV_ADMIN_KEY
from libs.devkit.broker import EmbeddedBroker
from services.scheduler.app import create_app
from services.scheduler.settings import SchedulerSettings

BENCH = "api.rate_limit"
ROUNDS, BLOCK = 1000, 100
FLOOD, FLOOD_S, EVERY = 2000, 6.8, 50  # the flood: 2,000 drafts in 6.8 s
ADMIN = {"X-API-Key": DEV_ADMIN_KEY}
DRAFT = {"options": {"urgency": 0.5}}
Send = Callable[[], Awaitable[httpx.Response]]


class CommandCount:
    """Counts the commands a Redis client sends, by wrapping its ``execute_command``."""

    def __init__(self, redis: Any) -> None:
        self.commands = 0
        original = redis.execute_command

        async def counted(*args: Any, **options: Any) -> Any:
            self.commands += 1
            return await original(*args, **options)

        redis.execute_command = counted


def limiter(app: Any, *, writes: Limit, reads: Limit) -> RateLimiter:
    installed: RateLimiter = app.state.rate_limiter
    runtime = app.state.runtime
    s = runtime.settings
    return RateLimiter(
        service=installed.service,
        keys=Keyspace(s.redis_prefix).child(s.service_name).child("ratelimit"),
        writes=writes,
        reads=reads,
        redis=lambda: runtime.redis,
    )


async def timed(send: Send, into: list[float]) -> httpx.Response:
    started = time.perf_counter()
    response = await send()
    into.append((time.perf_counter() - started) * 1000)
    return response


async def cost(app: Any, client: httpx.AsyncClient, tenant: dict[str, str]) -> None:
    """Round trips and latency per request, limiter on and off, alternating blocks."""
    counter = CommandCount(app.state.runtime.redis)
    limiters = {
        "on": limiter(
            app, writes=Limit("writes", 100_000, 1_000_000), reads=Limit("reads", 100_000, 1_000_000)
        ),
        "off": limiter(app, writes=Limit("writes", 0, 1), reads=Limit("reads", 0, 1)),
    }
    sends: dict[str, Send] = {
        "read": lambda: client.get("/v1/workloads?limit=1", headers=tenant),
        "write": lambda: client.post("/v1/workloads/drafts", json=DRAFT, headers=tenant),
    }
    for kind, send in sends.items():
        commands = {"on": 0, "off": 0}
        latency: dict[str, list[float]] = {"on": [], "off": []}
        for _ in range(BLOCK):  # warm-up, not measured
            await send()
        for block in range(ROUNDS // BLOCK * 2):
            mode = "on" if block % 2 == 0 else "off"
            app.state.rate_limiter = limiters[mode]
            before = counter.commands
            for _ in range(BLOCK):
                response = await timed(send, latency[mode])
                assert response.status_code in (200, 201), response.text
            commands[mode] += counter.commands - before
        per = {mode: commands[mode] / ROUNDS for mode in commands}
        method = "commands sent by the service's Redis client per request, limiter on minus off"
        emit(BENCH, f"{kind}_redis_round_trips_per_request", per["on"] - per["off"], "count", method=method)
        emit(BENCH, f"{kind}_redis_commands_per_request_limiter_on", per["on"], "count")
        emit(BENCH, f"{kind}_redis_commands_per_request_limiter_off", per["off"], "count")
        for mode in ("on", "off"):
            emit(BENCH, f"{kind}_p50_ms_limiter_{mode}", percentile(latency[mode], 50), "ms", requests=ROUNDS)
            emit(BENCH, f"{kind}_p99_ms_limiter_{mode}", percentile(latency[mode], 99), "ms", requests=ROUNDS)
        added = percentile(latency["on"], 50) - percentile(latency["off"], 50)
        emit(BENCH, f"{kind}_p50_ms_added_by_limiter", added, "ms")
    checks: list[float] = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        await limiters["on"].check(tenant="bench-check", method="GET")
        checks.append((time.perf_counter() - started) * 1000)
    emit(BENCH, "check_p50_ms", percentile(checks, 50), "ms", requests=ROUNDS)
    emit(BENCH, "check_p99_ms", percentile(checks, 99), "ms", requests=ROUNDS)


async def paced(sends: list[Send], *, rate_per_s: float, into: list[httpx.Response]) -> None:
    """Open loop: the i-th request starts at i / rate_per_s seconds, whatever came before."""
    begin = time.perf_counter()
    tasks = []
    for i, send in enumerate(sends):
        await asyncio.sleep(max(0.0, begin + i / rate_per_s - time.perf_counter()))
        tasks.append(asyncio.create_task(_append(into, send())))
    await asyncio.gather(*tasks)


async def isolation(
    app: Any, client: httpx.AsyncClient, flooder: dict[str, str], other: dict[str, str]
) -> None:
    """One tenant floods writes at the default limits; the other's requests are timed alone, then during."""
    defaults = SchedulerSettings()
    writes = Limit("writes", defaults.rate_limit_write_per_s, defaults.rate_limit_write_burst)
    app.state.rate_limiter = limiter(app, writes=writes, reads=Limit("reads", 100_000, 1_000_000))
    others = FLOOD // EVERY
    other_rate = others / FLOOD_S

    def draft(headers: dict[str, str], into: list[float] | None = None) -> Send:
        if into is None:
            return lambda: client.post("/v1/workloads/drafts", json=DRAFT, headers=headers)
        return lambda: timed(lambda: client.post("/v1/workloads/drafts", json=DRAFT, headers=headers), into)

    alone: list[float] = []
    served_alone: list[httpx.Response] = []
    await paced([draft(other, alone)] * others, rate_per_s=other_rate, into=served_alone)
    await asyncio.sleep(writes.burst / writes.rate_per_s)  # the other's bucket full again
    flood: list[httpx.Response] = []
    during: list[float] = []
    served: list[httpx.Response] = []
    started = time.perf_counter()
    await asyncio.gather(
        paced([draft(flooder)] * FLOOD, rate_per_s=FLOOD / FLOOD_S, into=flood),
        paced([draft(other, during)] * others, rate_per_s=other_rate, into=served),
    )
    elapsed = time.perf_counter() - started
    accepted = sum(r.status_code == 201 for r in flood)
    bound = writes.burst + math.ceil(writes.rate_per_s * elapsed)
    emit(BENCH, "flood_requests", FLOOD, "count", offered_s=FLOOD_S, seconds=round(elapsed, 3))
    emit(BENCH, "flood_accepted", accepted, "count", burst_plus_rate_over_flood=bound)
    emit(BENCH, "flood_refused_429", sum(r.status_code == 429 for r in flood), "count")
    fraction = sum(r.status_code == 201 for r in served) / len(served)
    emit(BENCH, "other_tenant_served_fraction", fraction, "ratio", requests=len(served))
    for label, latencies in (("alone", alone), ("during_flood", during)):
        emit(BENCH, f"other_tenant_p50_ms_{label}", percentile(latencies, 50), "ms")
        emit(BENCH, f"other_tenant_p99_ms_{label}", percentile(latencies, 99), "ms")


async def _append(into: list[httpx.Response], response: Awaitable[httpx.Response]) -> None:
    into.append(await response)


async def tenant(client: httpx.AsyncClient, tenant_id: str) -> dict[str, str]:
    created = await client.post(
        "/v1/admin/tenants", json={"tenant_id": tenant_id, "name": tenant_id}, headers=ADMIN
    )
    created.raise_for_status()
    return {"X-API-Key": created.json()["key"]["api_key"]}


async def run(env: BenchEnv, bootstrap: str) -> None:
    settings = SchedulerSettings(
        kafka_bootstrap_servers=bootstrap, kafka_topic_prefix=env.topic_prefix, database_url=env.database_url,
        db_schema=env.schema("scheduler"), redis_url=env.redis_url, redis_prefix=env.redis_prefix,
        log_json=False, log_level="WARNING",
    )  # fmt: skip
    app = create_app(settings)
    app.state.runtime.background = []  # no placer: nothing but the requests uses Redis
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench", timeout=60) as client:
            acme, globex = await tenant(client, "acme"), await tenant(client, "globex")
            log(f"cost: {ROUNDS} reads and {ROUNDS} writes, limiter on and off")
            await cost(app, client, acme)
            log(f"isolation: {FLOOD} drafts from one tenant, one per {EVERY} from the other")
            await isolation(app, client, acme, globex)


async def cleanup(env: BenchEnv) -> None:
    await env.drop("scheduler")


def main() -> None:
    env = BenchEnv.create()
    with EmbeddedBroker() as broker:
        try:
            asyncio.run(run(env, broker.bootstrap))
        finally:
            asyncio.run(cleanup(env))


if __name__ == "__main__":
    main()
