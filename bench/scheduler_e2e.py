"""Scheduler end to end: POST /v1/workloads over HTTP to the WorkloadPlacedV1 event seen on the broker.

The scheduler runs as it is deployed: its own process (``python -m services.scheduler`` under uvicorn, with
its consumers, placer and outbox relay) on the embedded broker, local Postgres and Redis, in a throw-away
schema and topic prefix. This process is the outside world: an HTTP client submitting 100 workloads per
second for 20 s (open loop: each submission starts on schedule, whatever came before), a reader of the
scheduler topic, and a stand-in node agent that starts and completes each job as soon as it is placed,
so the fleet never fills. Latency of a workload: from the start of its POST to the moment its
WorkloadPlacedV1 is read from the scheduler topic. Reports p50/p99/max of that and of the HTTP call, the
offered and achieved submission rate, how many placements were seen, and the scheduler process's CPU
per submission. Target: p99 under 50 ms. Prints one JSON object per result line.

Measured the way ``timeit`` measures: the first ``BENCH_WARMUP_S`` seconds of submissions (same rate) warm
the service's connections, prepared statements and caches and are left out of the figures, and this
process's garbage collector is off during the run, so a collection here is never counted as the service's
latency.

``BENCH_DUMP=<file>`` also writes every measured placement as ``[seconds into the run, latency ms]``, to
see whether the tail comes in bursts or grows with the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from decimal import Decimal
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from aiokafka import AIOKafkaConsumer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import BenchEnv, cpu_seconds, emit, log, percentile
from libs.common.bus import create_producer
from libs.common.events import EVENT_TYPES, Event, decode, encode, envelop, topics
from libs.common.events.agent import WorkloadExitedV1, WorkloadStartedV1
from libs.common.events.inventory import GpuRegisteredV1
from libs.common.events.scheduler import WorkloadPlacedV1
from libs.common.settings import DEV_ADMIN_KEY
from libs.devkit.broker import EmbeddedBroker, free_port

BENCH = "scheduler.e2e"
RATE_PER_S = int(os.environ.get("BENCH_RATE", "100"))
SECONDS = int(os.environ.get("BENCH_SECONDS", "20"))
WARMUP_S = int(os.environ.get("BENCH_WARMUP_S", "2"))
NODES, GPUS_PER_NODE = 32, 8
TARGET_P99_MS = 50.0
ADMIN = {"X-API-Key": DEV_ADMIN_KEY}
#: The placed event's type as it appears in the envelope's JSON: only those records are decoded.
PLACED_TYPE = b'"type":"' + WorkloadPlacedV1.model_fields["type"].default.encode() + b'"'
HTTP_MS: list[float] = []
PHASE: dict[str, float] = {}
SPEC = {
    "kind": "job",
    "image": {"name": "pytorch", "version": "2.3"},
    "resources": {"kind": "gpu", "model": "A100-80GB", "count": 1},
    "network": {"vpc_id": "vpc-bench", "subnet_id": "subnet-bench", "security_group_id": "sg-bench"},
    "urgency": 0.5,
    "time_limit_s": 600,
}
SPEC_JSON = json.dumps(SPEC)
DEPLOYED_CONFIG = Path(__file__).resolve().parents[1] / "deploy" / "k8s" / "control-plane" / "config.yaml"


def deployed_partitions() -> int:
    """KAFKA_PARTITIONS as the deployed manifests set it (overridable through the environment).

    The service creates its topics at start with this count. The embedded broker's memory storage lists
    every stored batch of a partition on each fetch that finds new data, so fewer partitions make each
    fetch cost more the longer a run goes: with the embedded default's 3, a 60 s run ended at p99 137 ms
    (second half 156 ms), with the deployed 12 at 57-59 ms. The embedded default stays at 3 for `make run`,
    whose idle polling costs the broker about 80 us per partition and fetch.
    """
    if os.environ.get("KAFKA_PARTITIONS"):
        return int(os.environ["KAFKA_PARTITIONS"])
    for doc in yaml.safe_load_all(DEPLOYED_CONFIG.read_text()):
        if doc and doc.get("kind") == "ConfigMap" and "KAFKA_PARTITIONS" in doc.get("data", {}):
            return int(doc["data"]["KAFKA_PARTITIONS"])
    raise RuntimeError(f"no KAFKA_PARTITIONS in {DEPLOYED_CONFIG}")


PARTITIONS = deployed_partitions()


class Watcher:
    """Reads the scheduler topic, stamps each placement's arrival and (``play_agent``) plays the node
    agent for it: started, then completed at once."""

    def __init__(self, *, bootstrap: str, prefix: str, play_agent: bool = True) -> None:
        self.arrived: dict[str, float] = {}
        self._prefix = prefix
        self._play_agent = play_agent
        self._consumer = AIOKafkaConsumer(
            prefix + topics.SCHEDULER,
            bootstrap_servers=bootstrap,
            group_id=prefix + "bench",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            # Measured alone at 100 records/s, a 10 ms wait reads as fast as 5 ms (p50 3.1 / p99 5.2 ms
            # against 2.9 / 5.5) with half the fetches, each of which costs the embedded broker a pass
            # over every partition (12 here).
            fetch_max_wait_ms=int(os.environ.get("BENCH_FETCH_WAIT_MS", "10")),
        )
        self._producer = create_producer(bootstrap=bootstrap, client_id="bench-agent") if play_agent else None
        self.ready = asyncio.Event()

    async def run(self, stop: asyncio.Event) -> None:
        await self._consumer.start()
        if self._producer is not None:
            await self._producer.start()
        try:
            # Joining the group takes seconds on the embedded broker: submissions wait for it, so no
            # latency includes the bench's own start-up (nor the fleet filling while no agent plays).
            while not self._consumer.assignment() and not stop.is_set():
                await self._consumer.getmany(timeout_ms=100)
            self.ready.set()
            while not stop.is_set():
                batches = await self._consumer.getmany(timeout_ms=20)
                now = time.perf_counter()
                for records in batches.values():
                    for record in records:
                        if PLACED_TYPE not in (record.value or b""):
                            continue
                        _, payload = decode(record.value or b"", EVENT_TYPES)
                        if isinstance(payload, WorkloadPlacedV1) and payload.workload_id not in self.arrived:
                            self.arrived[payload.workload_id] = now
                            if self._play_agent:
                                await self._finish(payload)
        finally:
            await self._consumer.stop()
            if self._producer is not None:
                await self._producer.stop()

    async def _finish(self, placed: WorkloadPlacedV1) -> None:
        ids = {
            "workload_id": placed.workload_id,
            "tenant_id": placed.tenant_id,
            "placement_id": placed.placement_id,
            "node": placed.node,
        }
        for payload in (WorkloadStartedV1(**ids), WorkloadExitedV1(**ids, outcome="completed")):
            await self._send(payload)

    async def _send(self, payload: Event) -> None:
        assert self._producer is not None  # only a watcher that plays the agent sends
        env = envelop(payload, source="bench")
        await self._producer.send(
            self._prefix + topics.NODE_AGENT, value=encode(env), key=env.subject.encode()
        )


async def register_fleet(
    bootstrap: str, prefix: str, *, nodes: int = NODES, gpus_per_node: int = GPUS_PER_NODE
) -> None:
    """Tell the scheduler of ``nodes`` x ``gpus_per_node`` whole A100s, as inventory would."""
    producer = create_producer(bootstrap=bootstrap, client_id="bench-inventory")
    await producer.start()
    try:
        for n in range(nodes):
            for i in range(gpus_per_node):
                gpu = GpuRegisteredV1(
                    gpu_uuid=f"GPU-{n}-{i}",
                    node=f"node-{n}",
                    index=i,
                    model="A100-80GB",
                    memory_bytes=80 * 1024**3,
                    units=Decimal(8),
                )
                env = envelop(gpu, source="bench")
                await producer.send(prefix + topics.INVENTORY, value=encode(env), key=env.subject.encode())
        await producer.flush()
    finally:
        await producer.stop()


async def submit_all(
    client: aiohttp.ClientSession, headers: dict[str, str], *, count: int, measured: bool = True
) -> dict[str, float]:
    sent: dict[str, float] = {}

    async def one() -> None:
        started = time.perf_counter()
        async with client.post("/v1/workloads", data=SPEC_JSON, headers=headers) as response:
            response.raise_for_status()
            sent[(await response.json())["workload_id"]] = started
        if measured:
            HTTP_MS.append((time.perf_counter() - started) * 1000)

    tasks = []
    begin = time.perf_counter()
    if measured:
        PHASE["begin"], PHASE["cpu_begin"] = begin, time.process_time()
    for i in range(count):
        await asyncio.sleep(max(0.0, begin + i / RATE_PER_S - time.perf_counter()))
        tasks.append(asyncio.create_task(one()))
    if measured:
        PHASE["offered_s"] = time.perf_counter() - begin
    await asyncio.gather(*tasks)
    if measured:
        PHASE["answered_s"] = time.perf_counter() - begin
    return sent


async def wait_capacity(
    client: aiohttp.ClientSession,
    headers: dict[str, str],
    *,
    gpus: int = NODES * GPUS_PER_NODE,
    timeout_s: float = 60.0,
) -> None:
    """Until the scheduler says it knows ``gpus`` GPUs."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        async with client.get("/v1/recommendations/gpu?memory_gb=1", headers=headers) as response:
            body = await response.json()
        if body["fleet_gpus"] >= gpus:
            return
        await asyncio.sleep(0.1)
    raise RuntimeError("the scheduler never learnt the fleet")


def start_service(
    env: BenchEnv, bootstrap: str, port: int, *, write_per_s: int = 10 * RATE_PER_S
) -> subprocess.Popen[bytes]:
    values = {
        "KAFKA_BOOTSTRAP_SERVERS": bootstrap, "KAFKA_TOPIC_PREFIX": env.topic_prefix,
        "DATABASE_URL": env.database_url, "DB_SCHEMA": env.schema("scheduler"), "REDIS_URL": env.redis_url,
        "REDIS_PREFIX": env.redis_prefix, "SCHEDULER_HTTP_PORT": str(port), "LOG_LEVEL": "WARNING",
        "LOG_JSON": "false", "DB_POOL_MAX": "20", "KAFKA_PARTITIONS": str(PARTITIONS),
        # One tenant submits the whole offered load: its write limit is raised past it, still checked.
        "RATE_LIMIT_WRITE_PER_S": str(write_per_s), "RATE_LIMIT_WRITE_BURST": str(write_per_s),
    }  # fmt: skip
    return subprocess.Popen([sys.executable, "-m", "services.scheduler"], env={**os.environ, **values})


async def bench_tenant(
    client: aiohttp.ClientSession, tenant: str = "bench", *, url: str = ""
) -> dict[str, str]:
    """Create ``tenant`` with the admin key (at ``url``, or the session's base URL); its JSON headers."""
    body = {"tenant_id": tenant, "name": tenant.title()}
    async with client.post(f"{url}/v1/admin/tenants", json=body, headers=ADMIN) as created:
        created.raise_for_status()
        key = (await created.json())["key"]["api_key"]
    return {"X-API-Key": key, "Content-Type": "application/json"}


async def wait_ready(client: aiohttp.ClientSession) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        with contextlib.suppress(aiohttp.ClientError):
            async with client.get("/readyz") as response:
                if response.status == 200:
                    return
        await asyncio.sleep(0.3)
    raise TimeoutError("the scheduler service did not become ready")


async def run(env: BenchEnv, broker: EmbeddedBroker) -> None:
    bootstrap = broker.bootstrap
    port = free_port()
    service = start_service(env, bootstrap, port)
    stop = asyncio.Event()
    watcher = Watcher(bootstrap=bootstrap, prefix=env.topic_prefix)
    # Idle connections are dropped before uvicorn's 5 s keep-alive timeout closes them under a request.
    connector = aiohttp.TCPConnector(limit=200, keepalive_timeout=3)
    try:
        async with aiohttp.ClientSession(
            base_url=f"http://127.0.0.1:{port}",
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=60),
            raise_for_status=False,
        ) as client:
            await wait_ready(client)
            headers = await bench_tenant(client)
            await register_fleet(bootstrap, env.topic_prefix)
            await wait_capacity(client, headers)
            watching = asyncio.create_task(watcher.run(stop))
            await asyncio.wait_for(watcher.ready.wait(), timeout=60)
            log(f"warming up: {RATE_PER_S}/s for {WARMUP_S}s, not measured")
            gc.collect()
            gc.freeze()
            gc.disable()
            warm = await submit_all(client, headers, count=RATE_PER_S * WARMUP_S, measured=False)
            await _all_seen(warm, watcher.arrived)
            log(f"submitting {RATE_PER_S}/s for {SECONDS}s")
            PHASE["service_cpu_begin"] = cpu_seconds(service.pid)
            PHASE["broker_cpu_begin"] = cpu_seconds(broker.pid) if broker.pid else 0.0
            sent = await submit_all(client, headers, count=RATE_PER_S * SECONDS)
            log(f"submitted {len(sent)}; {len(watcher.arrived)} placements seen so far")
            await _all_seen(sent, watcher.arrived)
            gc.enable()
            PHASE["cpu_s"] = time.process_time() - PHASE["cpu_begin"]
            PHASE["service_cpu_s"] = cpu_seconds(service.pid) - PHASE["service_cpu_begin"]
            if broker.pid:
                PHASE["broker_cpu_s"] = cpu_seconds(broker.pid) - PHASE["broker_cpu_begin"]
            stop.set()
            await watching
    finally:
        service.terminate()
        try:
            service.wait(timeout=20)
        except subprocess.TimeoutExpired:
            service.kill()
    report(sent, watcher.arrived)


async def _all_seen(sent: dict[str, float], arrived: dict[str, float], timeout_s: float = 10) -> None:
    """Until every submission's placement was read, or the timeout."""
    deadline = time.monotonic() + timeout_s
    while len(set(sent) & set(arrived)) < len(sent) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)


def report(sent: dict[str, float], arrived: dict[str, float]) -> None:
    latencies = [(arrived[w] - t) * 1000 for w, t in sent.items() if w in arrived]
    emit(BENCH, "submitted", len(sent), "count", warmup_s=WARMUP_S)
    # Achieved: submissions answered per second of the submission phase (offered: RATE_PER_S); a
    # starved event loop starts them late, so this shows when the offered load was not really applied.
    emit(BENCH, "offered_rate_per_s", RATE_PER_S, "1/s")
    emit(
        BENCH,
        "topic_partitions",
        PARTITIONS,
        "count",
        source="KAFKA_PARTITIONS of deploy/k8s/control-plane/config.yaml",
    )
    if PHASE.get("answered_s"):
        emit(BENCH, "achieved_submit_rate_per_s", len(sent) / PHASE["answered_s"], "1/s")
        emit(BENCH, "offer_phase_s", PHASE["offered_s"], "s", planned=SECONDS)
    if sent and PHASE.get("cpu_s"):
        # CPU per submission, from the first submission until every placement was seen (or the drain
        # deadline): of the scheduler process, and of this one (HTTP client, topic reader, stand-in agent).
        emit(BENCH, "service_cpu_ms_per_submission", PHASE["service_cpu_s"] * 1000 / len(sent), "ms")
        emit(BENCH, "client_cpu_ms_per_submission", PHASE["cpu_s"] * 1000 / len(sent), "ms")
        if "broker_cpu_s" in PHASE:
            emit(BENCH, "broker_cpu_ms_per_submission", PHASE["broker_cpu_s"] * 1000 / len(sent), "ms")
    if HTTP_MS:
        emit(BENCH, "http_submit_p50_ms", percentile(HTTP_MS, 50), "ms")
        emit(BENCH, "http_submit_p99_ms", percentile(HTTP_MS, 99), "ms")
    emit(BENCH, "placed_observed", len(latencies), "count")
    if sent:
        emit(BENCH, "placed_fraction", len(latencies) / len(sent), "ratio")
    if not latencies:
        return
    if os.environ.get("BENCH_DUMP"):
        dump_latencies(Path(os.environ["BENCH_DUMP"]), sent, arrived)
    p99 = percentile(latencies, 99)
    emit(BENCH, "submit_to_placed_p50_ms", percentile(latencies, 50), "ms")
    emit(BENCH, "submit_to_placed_p99_ms", p99, "ms")
    emit(BENCH, "submit_to_placed_max_ms", max(latencies), "ms")
    emit(BENCH, "submit_to_placed_p99_ms_vs_target", p99 / TARGET_P99_MS, "ratio", target=TARGET_P99_MS)
    # Drift: the p99 of the first and of the second half of the run. The embedded broker keeps every
    # record in memory and Postgres's first autovacuum comes a minute in, so both cost more as a run
    # goes on; a ratio well above 1 says the run's length, not only the rate, shaped the figures.
    ordered = sorted((t, (arrived[w] - t) * 1000) for w, t in sent.items() if w in arrived)
    half = len(ordered) // 2
    if half:
        first = percentile([lat for _, lat in ordered[:half]], 99)
        second = percentile([lat for _, lat in ordered[half:]], 99)
        emit(BENCH, "submit_to_placed_p99_ms_first_half", first, "ms")
        emit(BENCH, "submit_to_placed_p99_ms_second_half", second, "ms")
        emit(BENCH, "submit_to_placed_p99_drift", second / first, "ratio")


def dump_latencies(path: Path, sent: dict[str, float], arrived: dict[str, float]) -> None:
    """Each placement as [seconds into the run, latency in ms], in submission order: where the tail sits."""
    begin = min(sent.values())
    pairs = sorted((t - begin, (arrived[w] - t) * 1000) for w, t in sent.items() if w in arrived)
    path.write_text(json.dumps([[round(t, 4), round(ms, 3)] for t, ms in pairs]))
    log(f"latencies written to {path}")


async def cleanup(env: BenchEnv) -> None:
    await env.drop("scheduler")


def run_on_broker(run: Callable[[BenchEnv, EmbeddedBroker], Coroutine[Any, Any, None]]) -> None:
    """A scheduler benchmark's ``run`` against its own embedded broker, its schema and keys dropped after."""
    env = BenchEnv.create()
    log_path = Path(tempfile.gettempdir()) / f"bench-{env.token}-tansu.log"
    with EmbeddedBroker(log_path=log_path) as broker:
        try:
            asyncio.run(run(env, broker))
        finally:
            asyncio.run(cleanup(env))


def main() -> None:
    run_on_broker(run)


if __name__ == "__main__":
    main()
