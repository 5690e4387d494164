"""Scheduler backlog: 10,000 jobs queued before any GPU is known, then capacity for all of them at once.

The scheduler runs as it is deployed (``python -m services.scheduler``, its own process, with its consumers,
placer and outbox relay) on the embedded broker, local Postgres and Redis, in a throw-away schema and topic
prefix, with the deployed manifests' ``KAFKA_PARTITIONS``. It knows no GPU when this process submits
``BENCH_BACKLOG_JOBS`` one-GPU A100 jobs as one job array (``POST /v1/workload-arrays``, the fastest way
in): every one waits, ``no_matching_gpu``. (One H100 registered beforehand, and seen in Postgres, shows
the service's consumer has joined its group, seconds on the embedded broker, outside the clock.) Once
Postgres shows all of them queued and the placer has passed over them, this process publishes one
``GpuRegisteredV1`` per GPU of a fleet that holds exactly one job per GPU (1,250 nodes of 8 whole A100s
for 10,000 jobs), as inventory announces them, all at once.

Method: the clock starts just before the first registration is handed to the producer and stops when
Postgres shows no job of the array queued (polled every 20 ms over one connection, so within 20 ms late):
the moment the placer's last commit made them placed. ``placed_per_s`` is jobs / that time, set beside
Slurm's 240 jobs/s (the issue's figure) and the target of 2 s for 10,000 (at least 20x Slurm). Also
reported: when the fleet was published and when Postgres knew every GPU (the consumer's share of the
time), the placer's passes over the burst (the service's ``scheduler_passes_total``), and the scheduler
process's CPU seconds from the first registration to all placed. No node agent plays: nothing ends.
``BENCH_PROFILE=<file>`` runs the service under cProfile and writes its stats there once all are placed.
Prints one JSON object per result line.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import BenchEnv, cpu_seconds, emit, log
from bench.scheduler_array import items
from bench.scheduler_e2e import PARTITIONS, bench_tenant, run_on_broker, wait_ready
from libs.common.bus import create_producer
from libs.common.events import encode, envelop, topics
from libs.common.events.inventory import GpuRegisteredV1
from libs.devkit.broker import EmbeddedBroker, free_port

BENCH = "scheduler.backlog"
JOBS = int(os.environ.get("BENCH_BACKLOG_JOBS", "10000"))
GPUS_PER_NODE = 8
NODES = -(-JOBS // GPUS_PER_NODE)
TARGET_S = 2.0
SLURM_PER_S = 240.0
POLL_S = 0.02
#: The service under cProfile, its stats written on SIGUSR1 (uvicorn handles only SIGINT and SIGTERM).
PROFILED = """
import cProfile, runpy, signal, sys
profile = cProfile.Profile()
signal.signal(signal.SIGUSR1, lambda *_: profile.dump_stats({path!r}))
sys.argv = ["services.scheduler"]
profile.enable()
runpy.run_module("services.scheduler", run_name="__main__", alter_sys=True)
"""


def registration(node: str, index: int, *, model: str = "A100-80GB") -> tuple[bytes, bytes]:
    """One GPU's registration encoded beforehand (value, key), so the clock times the scheduler only."""
    gpu = GpuRegisteredV1(
        gpu_uuid=f"GPU-{node}-{index}",
        node=node,
        index=index,
        model=model,
        memory_bytes=80 * 1024**3,
        units=Decimal(8),
    )
    env = envelop(gpu, source="bench")
    return encode(env), env.subject.encode()


def fleet() -> list[tuple[bytes, bytes]]:
    return [registration(f"node-{n}", i) for n in range(NODES) for i in range(GPUS_PER_NODE)]


async def consumer_ready(conn: asyncpg.Connection[Any], bootstrap: str, prefix: str) -> None:
    """One GPU of another model registered and recorded: the consumer has joined its group (seconds on
    the embedded broker), so the clock does not time the join. No job of the backlog can use it."""
    await publish(bootstrap, prefix, [registration("warm-up", 0, model="H100-80GB")])
    deadline = time.monotonic() + 120
    while not await conn.fetchval("SELECT count(*) FROM gpus") and time.monotonic() < deadline:
        await asyncio.sleep(0.05)


def start_service(env: BenchEnv, bootstrap: str, port: int) -> subprocess.Popen[bytes]:
    values = {
        "KAFKA_BOOTSTRAP_SERVERS": bootstrap, "KAFKA_TOPIC_PREFIX": env.topic_prefix,
        "DATABASE_URL": env.database_url, "DB_SCHEMA": env.schema("scheduler"), "REDIS_URL": env.redis_url,
        "REDIS_PREFIX": env.redis_prefix, "SCHEDULER_HTTP_PORT": str(port), "LOG_JSON": "false",
        "LOG_LEVEL": os.environ.get("BENCH_LOG_LEVEL", "WARNING"), "DB_POOL_MAX": "20",
        "KAFKA_PARTITIONS": str(PARTITIONS),
    }  # fmt: skip
    profile = os.environ.get("BENCH_PROFILE")
    runner = ["-c", PROFILED.format(path=profile)] if profile else ["-m", "services.scheduler"]
    return subprocess.Popen([sys.executable, *runner], env={**os.environ, **values})


async def queued(conn: asyncpg.Connection[Any], array_id: str) -> int:
    return int(
        await conn.fetchval(
            "SELECT count(*) FROM workloads WHERE array_id = $1 AND state = 'queued'", array_id
        )
    )


async def settle(conn: asyncpg.Connection[Any], array_id: str) -> None:
    """Until every job waits with a reason: the placer has passed over the whole backlog."""
    deadline = time.monotonic() + 120
    query = "SELECT count(*) FROM workloads WHERE array_id = $1 AND state = 'queued' AND wait_reason IS NULL"
    while await conn.fetchval(query, array_id) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    await asyncio.sleep(1.0)  # nothing in flight: the passes triggered by the array are over


async def passes(client: aiohttp.ClientSession) -> float:
    async with client.get("/metrics") as response:
        text = await response.text()
    found = [line.split()[-1] for line in text.splitlines() if line.startswith("scheduler_passes_total ")]
    return float(found[0]) if found else float("nan")


async def publish(bootstrap: str, prefix: str, records: list[tuple[bytes, bytes]]) -> float:
    """Hand every registration to the producer; answers perf_counter() before the first."""
    producer = create_producer(bootstrap=bootstrap, client_id="bench-inventory")
    await producer.start()
    try:
        started = time.perf_counter()
        for value, key in records:
            await producer.send(prefix + topics.INVENTORY, value=value, key=key)
        await producer.flush()
        return started
    finally:
        await producer.stop()


async def watch(conn: asyncpg.Connection[Any], array_id: str, marks: dict[str, float]) -> None:
    """Stamp when Postgres knows every GPU and when no job of the array is queued (or 120 s)."""
    deadline = time.perf_counter() + 120
    while time.perf_counter() < deadline:
        known = await conn.fetchval("SELECT count(*) FROM gpus WHERE model = 'A100-80GB'")
        if "registered" not in marks and known >= NODES * GPUS_PER_NODE:
            marks["registered"] = time.perf_counter()
        left = await queued(conn, array_id)
        marks["left"] = left
        if left == 0:
            marks["placed"] = time.perf_counter()
            marks.setdefault("registered", marks["placed"])
            return
        await asyncio.sleep(POLL_S)


async def run(env: BenchEnv, broker: EmbeddedBroker) -> None:
    port = free_port()
    service = start_service(env, broker.bootstrap, port)
    try:
        async with aiohttp.ClientSession(
            base_url=f"http://127.0.0.1:{port}",
            timeout=aiohttp.ClientTimeout(total=120),
            # Idle connections are dropped before uvicorn's 5 s keep-alive timeout closes them under a
            # request (the consumer's group join takes that long).
            connector=aiohttp.TCPConnector(keepalive_timeout=3),
        ) as client:
            await wait_ready(client)
            headers = await bench_tenant(client)
            conn = await asyncpg.connect(
                env.database_url, server_settings={"search_path": env.schema("scheduler")}
            )
            try:
                await measure(client, conn, broker.bootstrap, env.topic_prefix, service.pid, headers)
            finally:
                await conn.close()
    finally:
        service.terminate()
        try:
            service.wait(timeout=60)
        except subprocess.TimeoutExpired:
            service.kill()


async def measure(
    client: aiohttp.ClientSession,
    conn: asyncpg.Connection[Any],
    bootstrap: str,
    prefix: str,
    pid: int,
    headers: dict[str, str],
) -> None:
    await consumer_ready(conn, bootstrap, prefix)
    log(f"queueing one array of {JOBS} jobs, no GPU of their model known")
    body = json.dumps({"items": items(JOBS)})
    async with client.post("/v1/workload-arrays", data=body, headers=headers) as r:
        answer = await r.json()
        if r.status != 201:
            raise RuntimeError(f"array refused: {r.status} {json.dumps(answer)[:500]}")
    array_id = answer["array_id"]
    await settle(conn, array_id)
    if (waiting := await queued(conn, array_id)) != JOBS:
        raise RuntimeError(f"{waiting} of {JOBS} jobs queued before the fleet appeared")
    records = fleet()
    log(f"{JOBS} jobs queued; registering {len(records)} GPUs at once")
    passes_before, cpu_before = await passes(client), cpu_seconds(pid)
    marks: dict[str, float] = {}
    watching = asyncio.create_task(watch(conn, array_id, marks))
    started = await publish(bootstrap, prefix, records)
    published = time.perf_counter()
    await watching
    cpu = cpu_seconds(pid) - cpu_before
    if os.environ.get("BENCH_PROFILE"):
        os.kill(pid, signal.SIGUSR1)
        await asyncio.sleep(2.0)
    report(marks, started=started, published=published, cpu=cpu, passes=await passes(client) - passes_before)


def report(marks: dict[str, float], *, started: float, published: float, cpu: float, passes: float) -> None:
    placed = JOBS - int(marks.get("left", JOBS))
    end = marks.get("placed", time.perf_counter())
    seconds = end - started
    method = f"first registration published until Postgres shows none queued (polled every {POLL_S}s)"
    emit(BENCH, "queued_jobs", JOBS, "count", fleet_gpus=NODES * GPUS_PER_NODE, topic_partitions=PARTITIONS)
    emit(BENCH, "placed_fraction", placed / JOBS, "ratio")
    emit(BENCH, "registered_to_all_placed_s", seconds, "s", target=TARGET_S, method=method)
    emit(BENCH, "placed_per_s", placed / seconds, "1/s", method="jobs placed / registered_to_all_placed_s")
    emit(BENCH, "placed_per_s_vs_slurm", placed / seconds / SLURM_PER_S, "ratio", slurm_per_s=SLURM_PER_S)
    emit(BENCH, "fleet_published_s", published - started, "s", method="producer handed every record")
    emit(BENCH, "fleet_registered_s", marks.get("registered", end) - started, "s", method="gpus rows")
    emit(BENCH, "placer_passes", passes, "count", method="scheduler_passes_total over the burst")
    emit(BENCH, "service_cpu_s", cpu, "s", method="scheduler process, first registration to all placed")


def main() -> None:
    run_on_broker(run)


if __name__ == "__main__":
    main()
