"""Telemetry fleet bench: a simulated fleet through the agent, the broker and the aggregator.

Starts its own embedded broker, the aggregator (`python -m services.telemetry`) and the agent
(`python -m services.telemetry agent`) as separate processes on throwaway topics, schema and Redis
prefix, lets them warm up, then measures for --seconds: samples/s into Redis, consumer lag every 5 s,
sample-to-Redis latency (the aggregator's histogram) and CPU seconds per 1,000 GPUs per second.

    .venv/bin/python bench/telemetry_fleet.py [--gpus 10000] [--seconds 60]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import cpu_seconds
from libs.common.bus.generations import generations_of
from libs.common.bus.kafka import group_lag
from libs.common.events import topics
from libs.common.redis import Keyspace, create_redis
from libs.common.settings import BaseServiceSettings
from libs.devkit.broker import EmbeddedBroker, free_port

BENCH = "telemetry_fleet"
TARGET_GPUS_PER_S = 10_000
TARGET_P99_S = 1.0
GPUS_PER_NODE = 8
PARTITIONS = 3
DSN = os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
REDIS = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")


def emit(metric: str, value: float | int | str, unit: str) -> None:
    print(json.dumps({"bench": BENCH, "metric": metric, "value": value, "unit": unit}), flush=True)


Buckets = list[tuple[float, float]]
STAGES = ("agent", "transit", "aggregator")  # telemetry_sample_stage_seconds, see the aggregator's docs


async def scrape(client: httpx.AsyncClient) -> tuple[float, dict[str, Buckets]]:
    """(samples ingested, cumulative latency buckets [(le, count)] of the end-to-end histogram under
    "total" and of each stage under its name) from the aggregator's /metrics."""
    text = (await client.get("/metrics")).text
    ingested, buckets = 0.0, {}
    for family in text_string_to_metric_families(text):
        if family.name == "telemetry_samples_ingested":
            ingested = sum(s.value for s in family.samples if s.name.endswith("_total"))
        if family.name == "telemetry_sample_to_redis_seconds":
            buckets["total"] = _buckets(family.samples)
        if family.name == "telemetry_sample_stage_seconds":
            for stage in STAGES:
                buckets[stage] = _buckets([s for s in family.samples if s.labels.get("stage") == stage])
    return ingested, buckets


def _buckets(samples: list[Any]) -> Buckets:
    return [(float(s.labels["le"]), s.value) for s in samples if s.name.endswith("_bucket")]


def quantile(before: Buckets, after: Buckets, q: float) -> float:
    """A quantile of the observations between two scrapes, interpolated inside its bucket."""
    counts = [(le, a - b) for (le, a), (_, b) in zip(after, before, strict=True)]
    total = counts[-1][1] if counts else 0.0
    if total <= 0:
        return float("nan")
    rank, lower, prev = q * total, 0.0, 0.0
    for le, cumulative in counts:
        if cumulative >= rank:
            if le == float("inf"):
                return lower
            return lower + (le - lower) * (rank - prev) / max(cumulative - prev, 1e-9)
        lower, prev = le, cumulative
    return lower


async def generation_topics(bootstrap: str, pattern: str) -> list[str]:
    """The samples topic's generations on the broker (and the topic itself): what ``pattern`` matches."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        return sorted(t for t in await admin.list_topics() if re.match(pattern, t))
    finally:
        await admin.close()


async def samples_lag(bootstrap: str, group: str, pattern: str) -> int:
    """Messages on the samples topic (every generation: ``pattern``) not yet committed by the group."""
    names = await generation_topics(bootstrap, pattern)
    partitions = [TopicPartition(topic, p) for topic in names for p in range(PARTITIONS)]
    return await group_lag(bootstrap=bootstrap, group=group, partitions=partitions)


def write_fleet(
    path: Path, gpus: int, *, model: str = "H100", hostname: str = "bench", pool: str | None = None
) -> int:
    """A fleet YAML of nodes with GPUS_PER_NODE ``model`` GPUs each (``<hostname>-00000``...), as many as
    fit in ``gpus``; returns how many GPUs it holds."""
    nodes = max(1, gpus // GPUS_PER_NODE)
    labels = "zone: z1, region: r1" + (f", pool: {pool}" if pool else "")
    lines = ["nodes:"]
    for i in range(nodes):
        node = f"{{hostname: {hostname}-{i:05d}, labels: {{{labels}}}"
        lines.append(f"  - {node}, gpus: [{{model: {model}, count: {GPUS_PER_NODE}}}]}}")
    path.write_text("\n".join(lines) + "\n")
    return nodes * GPUS_PER_NODE


async def measure(
    args: argparse.Namespace, env: dict[str, str], port: int, gpus: int, pids: dict[str, int]
) -> None:
    nodes = gpus // GPUS_PER_NODE
    bootstrap = env["KAFKA_BOOTSTRAP_SERVERS"]
    prefix = env["KAFKA_TOPIC_PREFIX"]
    group = f"{prefix}telemetry.samples"
    settings = BaseServiceSettings(kafka_topic_prefix=prefix)
    samples = generations_of(settings, topics.TELEMETRY_SAMPLES).pattern()
    # No keep-alive: scrapes 5 s apart would race uvicorn closing the idle connection after its 5 s.
    no_keepalive = httpx.Limits(max_keepalive_connections=0)
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{port}", timeout=10, limits=no_keepalive
    ) as client:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if (await scrape(client))[0] >= gpus:
                    break
            except httpx.HTTPError:
                pass  # the aggregator is still starting
            await asyncio.sleep(1)
        else:
            raise SystemExit("the fleet never reached Redis within 60 s; see the agent and aggregator logs")
        await asyncio.sleep(args.warmup)
        ingested0, buckets0 = await scrape(client)
        cpu0 = {name: cpu_seconds(pid) for name, pid in pids.items()}
        started = time.monotonic()
        lags: list[int] = []
        p99s: list[float] = []  # of each 5 s between scrapes: shows whether the tail is periodic
        previous = buckets0["total"]
        while time.monotonic() - started < args.seconds:
            lags.append(await samples_lag(bootstrap, group, samples))
            await asyncio.sleep(max(0.0, 5.0 - (time.monotonic() - started) % 5.0))
            now = (await scrape(client))[1]["total"]
            p99s.append(quantile(previous, now, 0.99))
            previous = now
        elapsed = time.monotonic() - started
        ingested1, buckets1 = await scrape(client)
        cpu1 = {name: cpu_seconds(pid) for name, pid in pids.items()}
    rate = (ingested1 - ingested0) / elapsed
    emit("fleet_gpus", gpus, "gpus")
    emit("samples_per_s", round(rate, 1), "samples/s")
    emit("samples_per_s_vs_target", round(rate / TARGET_GPUS_PER_S, 3), "ratio")
    emit("sustained_share_of_fleet", round(rate / gpus, 3), "ratio")
    # The fleet offers exactly `gpus` samples a second, so the rate lands on either side of it by where
    # the window cuts the ticks; what it can show is how far short of the fleet's samples the window
    # fell, in ticks (one tick: the most a window's edges can cut, whatever the rate).
    emit(
        "samples_short_of_fleet_ticks",
        round(max(0.0, gpus * elapsed - (ingested1 - ingested0)) / gpus, 3),
        "ticks",
    )
    emit("consumer_lag_series", ",".join(map(str, lags)), "messages every 5 s")
    emit("consumer_lag_first", lags[0], "messages")
    emit("consumer_lag_last", lags[-1], "messages")
    emit("consumer_lag_max", max(lags), "messages")
    # Stable: the backlog ends within one tick of batches of where it started and of its minimum.
    growth = max(lags[-1] - min(lags), lags[-1] - lags[0]) / nodes
    emit("consumer_lag_growth_ticks", round(growth, 3), "ticks")
    emit("consumer_lag_verdict", "growing" if growth > 1 else "stable", "verdict")
    p50, p99 = (quantile(buckets0["total"], buckets1["total"], q) for q in (0.5, 0.99))
    emit("sample_to_redis_p50", round(p50, 3), "s")
    emit("sample_to_redis_p99", round(p99, 3), "s")
    emit("sample_to_redis_p99_vs_target", round(p99 / TARGET_P99_S, 3), "ratio")
    emit("sample_to_redis_p99_series", ",".join(f"{p:.2f}" for p in p99s), "s, each 5 s")
    for stage in STAGES:
        if stage in buckets1:
            for q in (0.5, 0.99):
                value = quantile(buckets0[stage], buckets1[stage], q)
                emit(f"stage_{stage}_p{int(q * 100)}", round(value, 3), "s")
    for name in pids:
        per_s = (cpu1[name] - cpu0[name]) / elapsed
        emit(f"cpu_{name}_per_1000_gpus", round(per_s / (gpus / 1000), 4), "cpu-s/s per 1000 GPUs")
    total = sum(cpu1[n] - cpu0[n] for n in pids) / elapsed
    emit("cpu_total_per_1000_gpus", round(total / (gpus / 1000), 4), "cpu-s/s per 1000 GPUs")
    emit("load_average_1m", round(os.getloadavg()[0], 2), "runnable processes")


async def cleanup(token: str, env: dict[str, str]) -> None:
    conn = await asyncpg.connect(DSN)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{env["DB_SCHEMA"]}" CASCADE')
    finally:
        await conn.close()
    redis = create_redis(REDIS)
    try:
        await Keyspace(env["REDIS_PREFIX"]).clear(redis)
    finally:
        await redis.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--warmup", type=float, default=8.0)
    args = parser.parse_args()
    token = secrets.token_hex(4)
    workdir = Path(tempfile.mkdtemp(prefix="telemetry-bench-"))
    gpus = write_fleet(workdir / "fleet.yaml", args.gpus)
    port = free_port()
    with EmbeddedBroker(log_path=workdir / "broker.log") as broker:
        env = {
            **os.environ,
            "KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap,
            "KAFKA_TOPIC_PREFIX": f"bench{token}.",
            "KAFKA_PARTITIONS": str(PARTITIONS),
            "DB_SCHEMA": f"bench{token}_telemetry",
            "REDIS_PREFIX": f"bench:{token}:",
            "DATABASE_URL": DSN,
            "REDIS_URL": REDIS,
            "TELEMETRY_HTTP_PORT": str(port),
            "TELEMETRY_AGENT_MODE": "simulated",
            "TELEMETRY_FLEET_FILE": str(workdir / "fleet.yaml"),
            "LOG_LEVEL": "WARNING",
        }
        logs = {name: open(workdir / f"{name}.log", "wb") for name in ("aggregator", "agent")}  # noqa: SIM115
        cmd = [sys.executable, "-m", "services.telemetry"]
        aggregator = subprocess.Popen(cmd, env=env, stdout=logs["aggregator"], stderr=subprocess.STDOUT)
        agent = subprocess.Popen([*cmd, "agent"], env=env, stdout=logs["agent"], stderr=subprocess.STDOUT)
        broker_pid = broker._proc.pid if broker._proc else None  # its CPU counts too
        pids = {"agent": agent.pid, "aggregator": aggregator.pid} | (
            {"broker": broker_pid} if broker_pid else {}
        )
        try:
            asyncio.run(measure(args, env, port, gpus, pids))
        finally:
            for proc in (agent, aggregator):
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
            asyncio.run(cleanup(token, env))
        slow = (workdir / "agent.log").read_text(errors="replace").count("tick took")
        emit("agent_slow_ticks", slow, "ticks over the sample interval")


if __name__ == "__main__":
    main()
