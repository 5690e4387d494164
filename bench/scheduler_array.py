"""Scheduler job array: one POST /v1/workload-arrays of 10,000 jobs over HTTP, to all accepted and all placed.

The scheduler runs as it is deployed (``python -m services.scheduler``, its own process, with its consumers,
placer and outbox relay) on the embedded broker, local Postgres and Redis, in a throw-away schema and topic
prefix, and learns a fleet of 10,000 whole GPUs (1,250 nodes of 8) from inventory events first. This
process then sends one array of ``BENCH_ARRAY_ITEMS`` one-GPU jobs, each with its own ``args`` (a shard
index), so no two items are the same and nothing can be validated once for all.

Method: ``accepted`` is the wall time from the start of the POST (body already encoded) to the 201's body
read; the jobs/s figure is items / that time (target 10,000/s: the whole array answered within 1 s).
``placed`` is the time from the same start until Postgres shows every workload of the array out of the
queue (polled every 20 ms over one connection, so within 20 ms late), the moment the placer's commit made
them placed (target 3 s). No node agent plays: the fleet holds exactly one job per GPU. Also reported:
the scheduler process's CPU seconds over the request and until all were placed, and the request's size.
Prints one JSON object per result line.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import BenchEnv, cpu_seconds, emit, log
from bench.scheduler_e2e import (
    bench_tenant,
    register_fleet,
    run_on_broker,
    start_service,
    wait_capacity,
    wait_ready,
)
from libs.devkit.broker import EmbeddedBroker, free_port

BENCH = "scheduler.array"
ITEMS = int(os.environ.get("BENCH_ARRAY_ITEMS", "10000"))
NODES, GPUS_PER_NODE = 1250, 8
TARGET_JOBS_PER_S = 10_000.0
TARGET_PLACED_S = 3.0
POLL_S = 0.02


def items(count: int = ITEMS) -> list[dict[str, object]]:
    """``count`` one-GPU jobs, each its own shard (so no two are the same)."""
    return [
        {
            "kind": "job",
            "image": {"name": "pytorch", "version": "2.3"},
            "resources": {"kind": "gpu", "model": "A100-80GB", "count": 1},
            "network": {"vpc_id": "vpc-bench", "subnet_id": "subnet-bench", "security_group_id": "sg-bench"},
            "urgency": 0.5,
            "time_limit_s": 600,
            "command": ["python", "train.py"],
            "args": ["--shard", str(i), "--of", str(count)],
        }
        for i in range(count)
    ]


async def all_placed(conn: asyncpg.Connection[Any], array_id: str, started: float) -> tuple[float, int]:
    """Seconds from ``started`` until no workload of the array is queued (or 60 s), and how many left it."""
    deadline = time.perf_counter() + 60
    placed = 0
    while time.perf_counter() < deadline:
        placed = await conn.fetchval(
            "SELECT count(*) FROM workloads WHERE array_id = $1 AND state <> 'queued'", array_id
        )
        if placed >= ITEMS:
            break
        await asyncio.sleep(POLL_S)
    return time.perf_counter() - started, int(placed)


async def run(env: BenchEnv, broker: EmbeddedBroker) -> None:
    port = free_port()
    service = start_service(env, broker.bootstrap, port)
    try:
        async with aiohttp.ClientSession(
            base_url=f"http://127.0.0.1:{port}", timeout=aiohttp.ClientTimeout(total=120)
        ) as client:
            await wait_ready(client)
            headers = await bench_tenant(client)
            log(f"registering {NODES * GPUS_PER_NODE} GPUs")
            await register_fleet(broker.bootstrap, env.topic_prefix, nodes=NODES, gpus_per_node=GPUS_PER_NODE)
            await wait_capacity(client, headers, gpus=NODES * GPUS_PER_NODE, timeout_s=180)
            body = json.dumps({"items": items()}).encode()
            conn = await asyncpg.connect(
                env.database_url, server_settings={"search_path": env.schema("scheduler")}
            )
            try:
                await measure(client, conn, service.pid, headers, body)
            finally:
                await conn.close()
    finally:
        service.terminate()
        service.wait(timeout=20)


async def measure(
    client: aiohttp.ClientSession,
    conn: asyncpg.Connection[Any],
    pid: int,
    headers: dict[str, str],
    body: bytes,
) -> None:
    log(f"submitting one array of {ITEMS} jobs ({len(body)} bytes)")
    cpu_before = cpu_seconds(pid)
    started = time.perf_counter()
    keyed = {**headers, "Idempotency-Key": "bench-array"}
    async with client.post("/v1/workload-arrays", data=body, headers=keyed) as response:
        answer = await response.json()
        status = response.status
    accepted_s = time.perf_counter() - started
    cpu_accepted = cpu_seconds(pid) - cpu_before
    if status != 201:
        raise RuntimeError(f"array refused: {status} {json.dumps(answer)[:500]}")
    placed_s, placed = await all_placed(conn, answer["array_id"], started)
    cpu_placed = cpu_seconds(pid) - cpu_before
    emit(BENCH, "array_items", ITEMS, "count", request_bytes=len(body), fleet_gpus=NODES * GPUS_PER_NODE)
    emit(BENCH, "request_to_accepted_s", accepted_s, "s", method="POST start to the 201's body read")
    emit(
        BENCH,
        "accepted_jobs_per_s",
        ITEMS / accepted_s,
        "1/s",
        target=TARGET_JOBS_PER_S,
        method="items / (POST start to the 201's body read)",
    )
    emit(BENCH, "service_cpu_s_to_accepted", cpu_accepted, "s")
    emit(BENCH, "placed_fraction", placed / ITEMS, "ratio")
    emit(
        BENCH,
        "submit_to_all_placed_s",
        placed_s,
        "s",
        target=TARGET_PLACED_S,
        method=f"POST start until Postgres shows none of the array queued (polled every {POLL_S}s)",
    )
    emit(BENCH, "service_cpu_s_to_all_placed", cpu_placed, "s")


def main() -> None:
    run_on_broker(run)


if __name__ == "__main__":
    main()
