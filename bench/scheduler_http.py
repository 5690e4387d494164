"""Scheduler submissions over HTTP: 10,000 one-GPU jobs, 32 requests in flight, with 10,000 GPUs known.

The scheduler runs as it is deployed (``python -m services.scheduler``, its own process, with its consumers,
placer and outbox relay) on the embedded broker, local Postgres and Redis, in a throw-away schema and topic
prefix, and learns a fleet of 10,000 whole GPUs (1,250 nodes of 8) from inventory events first, and as
many more as the warm-up's jobs hold. This process is the client: ``BENCH_HTTP_JOBS`` one-GPU jobs, one
``POST /v1/workloads`` each, ``BENCH_HTTP_IN_FLIGHT`` at a time (closed loop: a request starts as soon as
one answers), as Slurm was measured with sbatch from parallel clients. Each job has its own ``args`` (a
shard index), so none is a copy of another.

Method: ``accepted_per_s`` is jobs / wall time from the first request's start to the last answer read;
``placed_after_last_answer_s`` is the time from that last answer until Postgres shows none of the tenant's
jobs queued (polled every 20 ms). The scheduler process's CPU per submission is taken over the submission
phase (``/proc``, user + system), and so is this client's (aiohttp, which shares the 2 cores). No node
agent plays: the fleet holds exactly one job per GPU. A warm-up of ``BENCH_HTTP_WARMUP`` submissions (same
concurrency) is left out. Ratio: against Slurm 22.05's sbatch from 8 parallel clients on the same machine,
about 300 jobs/s (issue 24). Prints one JSON object per result line.
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

from bench.common import BenchEnv, cpu_seconds, emit, log, percentile
from bench.scheduler_array import items
from bench.scheduler_e2e import (
    bench_tenant,
    register_fleet,
    run_on_broker,
    start_service,
    wait_capacity,
    wait_ready,
)
from libs.devkit.broker import EmbeddedBroker, free_port

BENCH = "scheduler.http"
JOBS = int(os.environ.get("BENCH_HTTP_JOBS", "10000"))
IN_FLIGHT = int(os.environ.get("BENCH_HTTP_IN_FLIGHT", "32"))
WARMUP = int(os.environ.get("BENCH_HTTP_WARMUP", "500"))
GPUS_PER_NODE = 8
#: 10,000 GPUs for the measured jobs, and as many more as the warm-up's jobs hold (they stay placed).
NODES = 1250 + -(-WARMUP // GPUS_PER_NODE)
TARGET_PER_S = 1000.0
SLURM_SBATCH_PER_S = 300.0
POLL_S = 0.02


async def submit(
    client: aiohttp.ClientSession, headers: dict[str, str], bodies: list[bytes]
) -> tuple[float, list[float]]:
    """Every body POSTed, ``IN_FLIGHT`` at a time; the wall seconds and each request's milliseconds."""
    pending = iter(bodies)
    latencies: list[float] = []

    async def lane() -> None:
        for body in pending:
            started = time.perf_counter()
            async with client.post("/v1/workloads", data=body, headers=headers) as response:
                if response.status != 201:
                    raise RuntimeError(f"submission refused: {response.status} {await response.text()}")
                await response.read()
            latencies.append((time.perf_counter() - started) * 1000)

    begin = time.perf_counter()
    await asyncio.gather(*(lane() for _ in range(IN_FLIGHT)))
    return time.perf_counter() - begin, latencies


async def none_queued(conn: asyncpg.Connection[Any], expected: int) -> tuple[float, int]:
    """Seconds until ``expected`` workloads are out of the queue (or 60 s), and how many are."""
    started = time.perf_counter()
    placed = 0
    while time.perf_counter() - started < 60:
        placed = await conn.fetchval("SELECT count(*) FROM workloads WHERE state <> 'queued'")
        if placed >= expected:
            break
        await asyncio.sleep(POLL_S)
    return time.perf_counter() - started, int(placed)


async def run(env: BenchEnv, broker: EmbeddedBroker) -> None:
    port = free_port()
    service = start_service(env, broker.bootstrap, port, write_per_s=5 * JOBS)
    connector = aiohttp.TCPConnector(limit=IN_FLIGHT, keepalive_timeout=3)
    try:
        async with aiohttp.ClientSession(
            base_url=f"http://127.0.0.1:{port}", connector=connector, timeout=aiohttp.ClientTimeout(total=60)
        ) as client:
            await wait_ready(client)
            headers = await bench_tenant(client)
            log(f"registering {NODES * GPUS_PER_NODE} GPUs")
            await register_fleet(broker.bootstrap, env.topic_prefix, nodes=NODES, gpus_per_node=GPUS_PER_NODE)
            await wait_capacity(client, headers, gpus=NODES * GPUS_PER_NODE, timeout_s=180)
            bodies = [json.dumps(item).encode() for item in items(WARMUP + JOBS)]
            conn = await asyncpg.connect(
                env.database_url, server_settings={"search_path": env.schema("scheduler")}
            )
            try:
                log(f"warming up: {WARMUP} submissions, not measured")
                await submit(client, headers, bodies[:WARMUP])
                await none_queued(conn, WARMUP)
                log(f"submitting {JOBS} jobs, {IN_FLIGHT} in flight")
                cpu_before, client_before = cpu_seconds(service.pid), time.process_time()
                wall_s, latencies = await submit(client, headers, bodies[WARMUP:])
                service_cpu = cpu_seconds(service.pid) - cpu_before
                client_cpu = time.process_time() - client_before
                placed_s, placed = await none_queued(conn, WARMUP + JOBS)
            finally:
                await conn.close()
    finally:
        service.terminate()
        service.wait(timeout=20)
    rate = JOBS / wall_s
    emit(BENCH, "jobs", JOBS, "count", in_flight=IN_FLIGHT, fleet_gpus=NODES * GPUS_PER_NODE, warmup=WARMUP)
    emit(
        BENCH,
        "accepted_per_s",
        rate,
        "1/s",
        target=TARGET_PER_S,
        method=f"jobs / (first request's start to last answer), {IN_FLIGHT} in flight, closed loop",
    )
    emit(BENCH, "accepted_per_s_vs_slurm", rate / SLURM_SBATCH_PER_S, "ratio", slurm_per_s=SLURM_SBATCH_PER_S)
    emit(BENCH, "service_cpu_ms_per_submission", service_cpu * 1000 / JOBS, "ms")
    emit(BENCH, "client_cpu_ms_per_submission", client_cpu * 1000 / JOBS, "ms")
    emit(BENCH, "http_p50_ms", percentile(latencies, 50), "ms")
    emit(BENCH, "http_p99_ms", percentile(latencies, 99), "ms")
    emit(BENCH, "placed_fraction", (placed - WARMUP) / JOBS, "ratio")
    emit(BENCH, "placed_after_last_answer_s", placed_s, "s", method=f"Postgres polled every {POLL_S}s")


async def cleanup(env: BenchEnv) -> None:
    await env.drop("scheduler")


def main() -> None:
    run_on_broker(run)


if __name__ == "__main__":
    main()
