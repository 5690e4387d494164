"""Inventory bench: register 10,000 GPUs through the fleet API, then time the capacity summary.

Runs the real service (embedded broker, local Postgres and Redis) in a throw-away schema and
topic prefix. Prints one JSON object per line. Targets (ours, for a console refreshing every
second): capacity p99 <= 100 ms, registration >= 2,000 GPUs/s.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import statistics
import sys
import time
from pathlib import Path

import asyncpg
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from libs.common.settings import DEV_ADMIN_KEY
from libs.devkit.broker import EmbeddedBroker
from services.inventory.app import create_app
from services.inventory.settings import InventorySettings

NODES = 1250
GPUS_PER_NODE = 8
QUERIES = 100
TARGET_P99_MS = 100.0
TARGET_RATE = 2000.0
HEADERS = {"X-API-Key": DEV_ADMIN_KEY}
MODELS = ("{model: A100-80GB, count: 8}", "{model: H100-80GB-SXM, count: 8}", "{model: L4, count: 8}")
POOLS = ("training", "training", "inference")
MIG = "{model: A100-80GB, count: 8, mig: [3g.40gb, 2g.20gb, 1g.10gb, 1g.10gb]}"


def fleet_yaml() -> str:
    lines = ["nodes:"]
    for n in range(NODES):
        group = MIG if n % 10 == 0 else MODELS[n % 3]
        lines += [
            f"  - hostname: bench-{n:05d}",
            f"    labels: {{zone: z{n % 6}, region: r{n % 2}, pool: {POOLS[n % 3]}}}",
            f"    gpus: [{group}]",
        ]
    return "\n".join(lines) + "\n"


def emit(metric: str, value: float, unit: str) -> None:
    print(json.dumps({"bench": "inventory_fleet", "metric": metric, "value": round(value, 3), "unit": unit}))


async def run(bootstrap: str, schema: str) -> None:
    settings = InventorySettings(
        kafka_bootstrap_servers=bootstrap,
        kafka_topic_prefix=f"bench{schema}.",
        db_schema=schema,
        log_json=False,
        redis_prefix=f"bench:{schema}:",
    )
    app = create_app(settings)
    text = fleet_yaml().encode()
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench", timeout=120) as client:
            headers = {**HEADERS, "content-type": "application/yaml"}
            started = time.perf_counter()
            response = await client.post("/v1/admin/fleet", content=text, headers=headers)
            elapsed = time.perf_counter() - started
            assert response.status_code == 200, response.text
            gpus = response.json()["gpus_changed"]
            assert gpus == NODES * GPUS_PER_NODE, response.text
            emit("gpus_registered", gpus, "GPUs")
            emit("registration_rate", gpus / elapsed, "GPUs/s")
            emit("registration_rate_vs_target", gpus / elapsed / TARGET_RATE, "ratio")
            started = time.perf_counter()
            again = await client.post("/v1/admin/fleet", content=text, headers=headers)
            assert again.json()["gpus_changed"] == 0
            emit("rediscovery_unchanged_s", time.perf_counter() - started, "s")
            await outbox_drained(app.state.runtime.pool)
            emit("outbox_drained_s", time.perf_counter() - started, "s")
            await query_capacity(client)


async def outbox_drained(pool: asyncpg.Pool) -> None:  # type: ignore[type-arg]
    """Wait until the relay has published every registration event, so queries run on a quiet service."""
    while await pool.fetchval("SELECT count(*) FROM outbox WHERE sent_at IS NULL"):
        await asyncio.sleep(0.2)


async def query_capacity(client: httpx.AsyncClient) -> None:
    timings = []
    for _ in range(QUERIES):
        started = time.perf_counter()
        response = await client.get("/v1/capacity", headers=HEADERS)
        timings.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200
    assert response.json()["total"]["total_gpus"] == NODES * GPUS_PER_NODE
    p99 = statistics.quantiles(timings, n=100)[98]
    emit("capacity_query_p50", statistics.median(timings), "ms")
    emit("capacity_query_p99", p99, "ms")
    emit("capacity_query_p99_vs_target", p99 / TARGET_P99_MS, "ratio")


async def drop(schema: str, dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


def main() -> None:
    schema = f"bench_inventory_{secrets.token_hex(3)}"
    broker = EmbeddedBroker().start()
    try:
        asyncio.run(run(broker.bootstrap, schema))
    finally:
        broker.stop()
        asyncio.run(drop(schema, InventorySettings().database_url))


if __name__ == "__main__":
    main()
