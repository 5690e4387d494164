"""Soak: the whole suite on its embedded default under steady load, to see whether it drifts.

What runs is what `make run` starts: the embedded broker (memory storage), the six services and the node
agent playing a simulated fleet (``BENCH_SOAK_GPUS`` whole GPUs, default 10,000, each sampled at 1 Hz, so
telemetry and alerting take that many samples a second, and the default alert rules evaluate them),
against the local Postgres and Redis, in throw-away schemas, topics and keys. This process submits
``BENCH_SOAK_RATE`` one-GPU jobs a second over HTTP (default 20, open loop) of a tenant without a
quota; each runs ``time_limit_s`` (60 s) on the simulated fleet and ends, so billing meters a steady
population of running work. It reads the scheduler topic to stamp each job's WorkloadPlacedV1.

Measured over ``BENCH_SOAK_S`` seconds (default 120, to fit `make bench`'s 240 s a benchmark; the
report's run is 3,600 with `--timeout 4000`) after a warm-up of ``BENCH_SOAK_WARMUP_S`` (20):
submit-to-placed latency, as p99 of the first and of the last tenth of the run and their ratio (target at
most 1.2); every ``BENCH_SOAK_SAMPLE_S`` (10) the resident memory of each process (``/proc/<pid>/status``
VmRSS), the consumer lag every service reports (``gpucloud_consumer_lag`` summed over its /metrics) and
the PostgreSQL connections the stack holds (``pg_stat_activity`` rows named ``gpucloud-<its schemas>``).
Memory and lag are reported as the last tenth's mean over the first tenth's (flat: near 1; lag in
messages, since it can be 0), connections as the peak against the budget README.md states for the
defaults (75). Prints one JSON object per result line.

Measured 2026-12-06 on the 2-core dev machine at 20/s with 10,000 GPUs. Over 120 s: the embedded
broker's memory went from 36 to 133 MiB (3.7x), telemetry's from 107 to 175 MiB, the others within 6%
(recovery 20%); submit-to-placed p99 630 ms in the first tenth, 1,525 ms in the last (2.4x); lag summed
143 -> 319 messages; PostgreSQL connections peaked at 44. Over 600 s: broker 52 -> 551 MiB (10.6x; its
memory storage keeps every record, about 0.8 MiB/s of samples here, and honours neither
``retention.ms`` nor DeleteRecords, while DeleteTopics does free a topic's records), telemetry 129 ->
203 MiB, alerting 1.22x, the others within 13%; p99 1,148 -> 3,006 ms (2.6x); lag 160 -> 9,587
messages (the consumers fall behind as every fetch walks a longer partition, beside 10,000 samples a
second through telemetry, alerting, billing and recovery on two cores); connections peaked at 45 of 75.

Since telemetry.samples is written in generations (libs/common/bus/generations.py; ``BENCH_SOAK_GENERATION_S``
sets KAFKA_GENERATION_S, 60 below so that minutes see many) and billing reads rollups from their own
topic, measured 2026-12-07 at 10,000 GPUs: over 600 s after a 150 s warm-up the broker held 148 -> 330
MiB, p99 2,115 -> 2,345 ms (1.11x), transactional lag 1,451 -> 1,983; over 480 s after 300 s of warm-up
the broker 265 -> 345 MiB (peak 361, where it had grown without end), p99 1,520 -> 3,009 ms (1.98x),
and the sample readers' lag (``samples_lag_*``, outside gpucloud_consumer_lag) 83,125 -> 355,541 node
batches for telemetry and about 300,000 for recovery: two cores do not carry 10,000 GPUs' samples, so
the keeper drops generations four generations late, with a warning. At 2,000 GPUs the 60 s jobs of 20/s
outgrow the fleet (p99 23 -> 65 s, queueing), so that size measures the queue, not drift.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
from aiokafka.errors import KafkaError
from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import emit, log, percentile
from bench.scheduler_e2e import Watcher, bench_tenant
from bench.telemetry_fleet import generation_topics, samples_lag, write_fleet
from libs.common.bus.generations import generations_of
from libs.common.db.migrate import SERVICES
from libs.common.events import topics
from libs.common.redis import Keyspace, create_redis
from libs.common.settings import BaseServiceSettings
from libs.devkit.broker import EmbeddedBroker, free_ports
from libs.devkit.devstack import AGENT, Stack

BENCH = "soak"
SECONDS = float(os.environ.get("BENCH_SOAK_S", "120"))
WARMUP_S = float(os.environ.get("BENCH_SOAK_WARMUP_S", "20"))
RATE = float(os.environ.get("BENCH_SOAK_RATE", "20"))
GPUS = int(os.environ.get("BENCH_SOAK_GPUS", "10000"))
SAMPLE_S = float(os.environ.get("BENCH_SOAK_SAMPLE_S", "10"))
#: The samples topic's generation (KAFKA_GENERATION_S); None: the stack's default (300 s).
GENERATION_S = os.environ.get("BENCH_SOAK_GENERATION_S")
SAMPLE_READERS = ("telemetry.samples", "alerting.samples", "recovery.samples")
TARGET_DRIFT = 1.2
#: README.md, "PostgreSQL connections": one replica of each service at the default DB_POOL_MAX.
CONNECTION_BUDGET = 75
JOB = {
    "kind": "job",
    "image": {"name": "pytorch", "version": "2.3"},
    "resources": {"kind": "gpu", "model": "H100-80GB-SXM", "count": 1},
    "network": {"vpc_id": "vpc-soak", "subnet_id": "subnet-soak", "security_group_id": "sg-soak"},
    "urgency": 0.5,
    "time_limit_s": 60,
}


def rss_mb(pid: int) -> float | None:
    """Resident memory of a process in MiB; None once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return None


async def lag_of(client: aiohttp.ClientSession, url: str) -> float:
    async with client.get(f"{url}/metrics") as response:
        text = await response.text()
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "gpucloud_consumer_lag"
        for sample in family.samples
    )


async def connections(database_url: str, prefix: str) -> int:
    conn = await asyncpg.connect(database_url)
    try:
        held = await conn.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE $1", f"gpucloud-{prefix}%"
        )
    finally:
        await conn.close()
    return int(held)


async def submit(
    client: aiohttp.ClientSession,
    url: str,
    headers: dict[str, str],
    *,
    seconds: float,
    sent: dict[str, float],
) -> int:
    """Open loop at RATE a second for ``seconds``; returns how many were refused."""
    refused = 0
    tasks: list[asyncio.Task[None]] = []
    body = json.dumps(JOB)

    async def one() -> None:
        nonlocal refused
        started = time.perf_counter()
        try:
            async with client.post(f"{url}/v1/workloads", data=body, headers=headers) as response:
                if response.status != 201:
                    refused += 1
                    return
                sent[(await response.json())["workload_id"]] = started
        except aiohttp.ClientError:
            refused += 1

    begin = time.perf_counter()
    count = int(seconds * RATE)
    for i in range(count):
        await asyncio.sleep(max(0.0, begin + i / RATE - time.perf_counter()))
        tasks.append(asyncio.create_task(one()))
    await asyncio.gather(*tasks)
    return refused


async def run(stack: Stack, broker: EmbeddedBroker, env: dict[str, str], prefix: str) -> None:
    stop = asyncio.Event()
    placements = Watcher(bootstrap=broker.bootstrap, prefix=env["KAFKA_TOPIC_PREFIX"], play_agent=False)
    pids = {name: proc.pid for name, proc in stack.procs.items()} | (
        {"broker": broker._proc.pid} if broker._proc else {}
    )
    samples: list[dict[str, Any]] = []
    topic_prefix = env["KAFKA_TOPIC_PREFIX"]
    settings = BaseServiceSettings(kafka_topic_prefix=topic_prefix)
    pattern = generations_of(settings, topics.TELEMETRY_SAMPLES).pattern()
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as client:
        scheduler = stack.url("scheduler")
        headers = await bench_tenant(client, "soak", url=scheduler)
        reading = asyncio.create_task(placements.run(stop))

        async def sample_loop(begin: float) -> None:
            while not stop.is_set():
                lags = {}
                for service in SERVICES:
                    with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                        lags[service] = await lag_of(client, stack.url(service))
                readers = {}
                for reader in SAMPLE_READERS:  # the side streams, outside gpucloud_consumer_lag
                    with contextlib.suppress(KafkaError, TimeoutError):
                        readers[reader] = await samples_lag(broker.bootstrap, topic_prefix + reader, pattern)
                samples.append(
                    {
                        "t": time.perf_counter() - begin,
                        "rss": {name: mb for name, pid in pids.items() if (mb := rss_mb(pid)) is not None},
                        "lag": lags,
                        "samples_lag": readers,
                        "generations": len(await generation_topics(broker.bootstrap, pattern)),
                        "pg": await connections(env["DATABASE_URL"], prefix),
                    }
                )
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), SAMPLE_S)

        warm: dict[str, float] = {}
        log(f"warming up {WARMUP_S:.0f}s at {RATE}/s")
        await submit(client, scheduler, headers, seconds=WARMUP_S, sent=warm)
        sent: dict[str, float] = {}
        begin = time.perf_counter()
        sampling = asyncio.create_task(sample_loop(begin))
        log(f"soaking {SECONDS:.0f}s at {RATE}/s, {GPUS} GPUs at 1 Hz")
        refused = await submit(client, scheduler, headers, seconds=SECONDS, sent=sent)
        deadline = time.monotonic() + 30
        while len(set(sent) - set(placements.arrived)) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        stop.set()
        await asyncio.gather(reading, sampling)
    report(sent, placements.arrived, samples, refused, begin)


def _tenth_ratio(values: list[float]) -> tuple[float, float]:
    tenth = max(1, len(values) // 10)
    first, last = values[:tenth], values[-tenth:]
    return sum(first) / len(first), sum(last) / len(last)


def report(
    sent: dict[str, float],
    arrived: dict[str, float],
    samples: list[dict[str, Any]],
    refused: int,
    begin: float,
) -> None:
    emit(BENCH, "seconds", SECONDS, "s", gpus=GPUS, rate_per_s=RATE, warmup_s=WARMUP_S, sample_s=SAMPLE_S)
    emit(BENCH, "submitted", len(sent), "count", refused=refused)
    ordered = sorted((t - begin, (arrived[w] - t) * 1000) for w, t in sent.items() if w in arrived)
    emit(BENCH, "placed_fraction", len(ordered) / max(1, len(sent)), "ratio")
    if len(ordered) >= 20:
        tenth = len(ordered) // 10
        first = percentile([ms for _, ms in ordered[:tenth]], 99)
        last = percentile([ms for _, ms in ordered[-tenth:]], 99)
        emit(BENCH, "submit_to_placed_p99_ms", percentile([ms for _, ms in ordered], 99), "ms")
        emit(BENCH, "submit_to_placed_p99_first_tenth_ms", first, "ms")
        emit(BENCH, "submit_to_placed_p99_last_tenth_ms", last, "ms")
        emit(
            BENCH,
            "p99_last_over_first_tenth",
            last / first,
            "ratio",
            target=TARGET_DRIFT,
            method="submit-to-placed p99 of the last tenth of placements over the first tenth's",
        )
    if len(samples) < 2:
        return
    for name in sorted(samples[0]["rss"]):
        series = [s["rss"][name] for s in samples if name in s["rss"]]
        first, last = _tenth_ratio(series)
        emit(BENCH, f"rss_mb_{name}", last, "MiB", first_tenth=round(first, 1), peak=round(max(series), 1))
        emit(BENCH, f"rss_last_over_first_tenth_{name}", last / first, "ratio")
    lag = [sum(s["lag"].values()) for s in samples]
    first, last = _tenth_ratio(lag)
    emit(BENCH, "consumer_lag_first_tenth", first, "messages", method="gpucloud_consumer_lag summed")
    emit(BENCH, "consumer_lag_last_tenth", last, "messages", peak=max(lag))
    readers = [sum(s["samples_lag"].values()) for s in samples]
    first, last = _tenth_ratio(readers)
    emit(
        BENCH,
        "samples_lag_first_tenth",
        first,
        "messages",
        method="telemetry, alerting and recovery's sample readers' groups, over every generation, summed",
    )
    emit(BENCH, "samples_lag_last_tenth", last, "messages", peak=max(readers))
    for reader in SAMPLE_READERS:
        series = [s["samples_lag"].get(reader, 0) for s in samples]
        first, last = _tenth_ratio(series)
        emit(BENCH, f"samples_lag_last_tenth_{reader}", last, "messages", first_tenth=first, peak=max(series))
    gens = [s["generations"] for s in samples]
    emit(
        BENCH,
        "sample_generations_peak",
        max(gens),
        "count",
        last=gens[-1],
        generation_s=GENERATION_S or "default",
        method="telemetry.samples topics on the broker (every generation, and the topic itself), sampled",
    )
    held = [s["pg"] for s in samples]
    emit(
        BENCH,
        "postgres_connections_peak",
        max(held),
        "count",
        budget=CONNECTION_BUDGET,
        last=held[-1],
        method="pg_stat_activity rows named gpucloud-<the stack's schemas>, sampled",
    )


async def cleanup(database_url: str, redis_url: str, prefix: str, redis_prefix: str) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        for service in SERVICES:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{prefix}{service}" CASCADE')
    finally:
        await conn.close()
    redis = create_redis(redis_url)
    try:
        await Keyspace(redis_prefix).clear(redis)
    finally:
        await redis.aclose()


def main() -> None:
    token = secrets.token_hex(3)
    prefix = f"soak{token}_"
    workdir = Path(tempfile.mkdtemp(prefix="soak-bench-"))
    gpus = write_fleet(workdir / "fleet.yaml", GPUS, model="H100-80GB-SXM", hostname="soak", pool="training")
    database_url = os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
    redis_url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    redis_prefix = f"soak:{token}:"
    with EmbeddedBroker(log_path=workdir / "broker.log") as broker:
        env = {
            **os.environ,
            "KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap,
            "KAFKA_TOPIC_PREFIX": f"soak{token}.",
            "GPUCLOUD_SCHEMA_PREFIX": prefix,
            "DATABASE_URL": database_url,
            "REDIS_URL": redis_url,
            "REDIS_PREFIX": redis_prefix,
            "TELEMETRY_AGENT_MODE": "simulated",
            "INVENTORY_FLEET_FILE": str(workdir / "fleet.yaml"),
            "TELEMETRY_FLEET_FILE": str(workdir / "fleet.yaml"),
            "LOG_LEVEL": "WARNING",
            "LOG_JSON": "false",
            # One tenant sends the whole load: its write limit is raised past it, still checked.
            "RATE_LIMIT_WRITE_PER_S": str(10 * RATE),
            "RATE_LIMIT_WRITE_BURST": str(int(10 * RATE)),
        } | ({"KAFKA_GENERATION_S": GENERATION_S} if GENERATION_S else {})
        logs = workdir / "logs"
        logs.mkdir()
        stack = Stack(env=env, logs=logs, base_port=free_ports(len(SERVICES)))
        try:
            stack.migrate()
            stack.start()
            not_ready = stack.wait_ready(timeout_s=120)
            if not_ready:
                raise SystemExit(f"not ready: {not_ready}; logs in {logs}")
            log(f"stack up: {gpus} GPUs, logs in {logs}")
            asyncio.run(run(stack, broker, env, prefix))
        finally:
            stack.stop()
            asyncio.run(cleanup(database_url, redis_url, prefix, redis_prefix))
            log(f"agent slow ticks: {(logs / f'{AGENT}.log').read_text(errors='replace').count('tick took')}")


if __name__ == "__main__":
    main()
