"""Recovery under 1,000 faults on a simulated fleet of 1,000 GPUs: the SLO at real scale, then the service.

Part one (bench/_recovery_virtual.py, bench "recovery.slo ..."): the recovery SLO at real scale. Recovery's
handlers and tick run on a virtual clock with its default timings; the stand-ins' migration phases last
what the simulated fleet documents for real hardware; nothing is scaled, so the shares within 60 s and
3 minutes (detection to the host running the workload again, per fault class) compare with the article's
92 % within 3 minutes. See that module and docs/recovery.md for the method.

Part two (bench "recovery.sim ..."): the REAL recovery service runs as its own process
(python -m services.recovery) on the real broker, Postgres and Redis. This script is everything around
it, clearly stand-ins: it places the workloads, injects fault signals of mixed kinds, and answers
recovery's requests the way inventory (drain confirmations, returns to service), the scheduler
(re-placement on a healthy GPU) and the node agent (checkpoint/transfer/restore/running with
scaled-down durations) would.

    python bench/recovery_sim.py [--part both|virtual|process] [--gpus 1000] [--faults 1000] [--rate 20]
                                 [--load 0.7] [--late-placements 3] [--virtual-per-hour 120]

In part two time is compressed to fit in about 100 s: faults arrive at --rate per second (20/s by
default), migration phases last 0.5-3 s each (about a tenth of real ones), the health check settles
after 3 s (RECOVERY_SETTLE_S), and the fold and correlation windows shrink from 10 min to 5 s and 1 s.
So part two reports no time to recover nor any share within 60 s or 3 minutes (the thresholds would
not be scaled with the phases); it reports what compression does not distort: incidents opened and
closed, workloads lost or stranded, late placements, time to detect over the real broker, CPU.

--late-placements N makes the stand-in scheduler reproduce, N times, the ordering that can strand a
workload: it re-places a migrating workload onto a free GPU whose drain (to failed: the incident will
escalate) was requested but not yet applied, as a scheduler that had not yet seen the drain would, and
its WorkloadPlaced/WorkloadEnded events reach recovery only after that GPU's incident has closed (a
lagging scheduler topic). Recovery must still move the workload off the failed GPU.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import asyncpg
import httpx

from bench._recovery_virtual import run_virtual
from bench.common import BenchEnv, cpu_seconds, emit, log, percentile
from libs.common.bus import create_consumer, create_producer
from libs.common.events import EVENT_TYPES, Event, decode, encode, envelop, topics
from libs.common.events.agent import MigrationStepV1
from libs.common.events.inventory import GpuHealthChangedV1
from libs.common.events.recovery import (
    DrainRequestedV1,
    IncidentClosedV1,
    MigrationRequestedV1,
    ReturnToServiceRequestedV1,
)
from libs.common.events.scheduler import (
    AllocationItem,
    WorkloadEndedV1,
    WorkloadMigratingV1,
    WorkloadPlacedV1,
)
from libs.common.events.telemetry import FaultSignaledV1
from libs.common.settings import DEV_ADMIN_KEY
from libs.devkit.broker import EmbeddedBroker, free_port

BENCH = "recovery.sim (recovery service with stand-in responders)"
GPUS_PER_NODE = 8
# (kind, xid, weight): restarts, GPU drains, node drains, non-recoverable, ignored, unknown.
MIX: list[tuple[str, int | None, int]] = [
    ("xid", 13, 12), ("xid", 31, 8), ("xid", 43, 5), ("oom", None, 5),
    ("xid", 48, 12), ("xid", 63, 8), ("xid", 62, 5), ("xid", 74, 5), ("xid", 95, 5), ("xid", 119, 5),
    ("xid", 46, 5), ("xid", 79, 3), ("lost", None, 2),
    ("xid", 54, 3), ("xid", 64, 3), ("ecc", None, 3), ("thermal", None, 3),
    ("xid", 92, 3), ("xid", 45, 2), ("power", None, 2), ("xid", 999, 1),
]  # fmt: skip
PHASES = (("checkpoint", 30), ("transfer", 70), ("restore", 95), ("running", 100))
# Inventory's health transitions (services/inventory/domain/health.py): target -> states it may start from.
# A request that does not apply changes nothing and emits nothing, as in inventory.
FROM_STATES = {
    "draining": {"healthy", "degraded"},
    "failed": {"healthy", "degraded", "draining"},
    "healthy": {"draining", "failed", "degraded"},
}


@dataclass
class Fleet:
    """The stand-ins' view of the world: GPU health and where every workload runs."""

    gpus: dict[str, str]  # gpu -> node
    health: dict[str, str] = field(default_factory=dict)
    workload_gpu: dict[str, str] = field(default_factory=dict)
    placement: dict[str, str] = field(default_factory=dict)
    moves_pending: dict[str, int] = field(default_factory=dict)  # workload -> migrations in flight
    closed: dict[str, IncidentClosedV1] = field(default_factory=dict)

    def free_healthy(self, rng: random.Random, avoid_node: str | None) -> str | None:
        used = set(self.workload_gpu.values())
        free = [
            g for g, n in self.gpus.items()
            if self.health.get(g, "healthy") == "healthy" and g not in used and n != avoid_node
        ]  # fmt: skip
        return rng.choice(free) if free else None


class Sim:
    def __init__(self, *, args: argparse.Namespace, bootstrap: str, prefix: str) -> None:
        self.args, self.prefix, self.rng = args, prefix, random.Random(7)
        gpus = {f"n{n:03d}-g{i}": f"n{n:03d}" for n in range(args.gpus // GPUS_PER_NODE) for i in range(8)}
        self.fleet = Fleet(gpus=gpus)
        self.producer = create_producer(bootstrap=bootstrap, client_id="bench-standins")
        self.bootstrap = bootstrap
        self.tasks: set[asyncio.Task[None]] = set()
        self.waits = 0
        # Late placements: a GPU whose drain to failed is held back until a migration lands on it
        # (gpu -> incident), and scheduler events held until that incident closes (incident -> events).
        self.late_budget = args.late_placements
        self.bait: dict[str, str] = {}
        self.held: dict[str, list[WorkloadPlacedV1 | WorkloadEndedV1]] = {}
        self.late_injected = 0
        self.moves_after_close = 0

    async def send(self, topic: str, payload: Event, *, tenant: str | None = None) -> None:
        env = envelop(payload, source="bench-standin", tenant=tenant)
        await self.producer.send(f"{self.prefix}{topic}", value=encode(env), key=env.subject.encode())

    def later(self, delay: float, coro: Any) -> None:
        async def run() -> None:
            try:
                await asyncio.sleep(delay)
            except asyncio.CancelledError:
                coro.close()  # cancelled at the end of the run before it started: not a lost await
                raise
            await coro

        task = asyncio.create_task(run())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def placed_event(self, workload: str, gpu: str, placement: str) -> WorkloadPlacedV1:
        self.fleet.workload_gpu[workload], self.fleet.placement[workload] = gpu, placement
        item = AllocationItem(gpu_uuid=gpu, units=Decimal(8), model="H100-80GB-SXM")
        return WorkloadPlacedV1(
            workload_id=workload, tenant_id=f"t{int(workload[1:]) % 10}", placement_id=placement,
            node=self.fleet.gpus[gpu], allocations=[item], kind="job", priority=0.5,
        )  # fmt: skip

    async def place(self, workload: str, gpu: str, placement: str) -> None:
        placed = self.placed_event(workload, gpu, placement)
        await self.send(topics.SCHEDULER, placed, tenant=placed.tenant_id)

    async def load(self) -> int:
        gpus = list(self.fleet.gpus)
        self.rng.shuffle(gpus)
        count = int(len(gpus) * self.args.load)
        for i, gpu in enumerate(gpus[:count]):
            await self.place(f"w{i}", gpu, f"w{i}-p0")
        await self.producer.flush()
        return count

    def fault_target(self) -> str:
        busy = set(self.fleet.workload_gpu.values())
        healthy = [g for g in self.fleet.gpus if self.fleet.health.get(g, "healthy") == "healthy"]
        loaded = [g for g in healthy if g in busy]
        pool = loaded if loaded and self.rng.random() < 0.85 else healthy
        return self.rng.choice(pool)

    async def inject(self, i: int) -> None:
        kind, xid, _ = self.rng.choices(MIX, weights=[w for *_, w in MIX])[0]
        gpu = self.fault_target()
        fault = FaultSignaledV1(
            fault_id=f"f{i}", kind=kind, xid=xid, gpu_uuid=gpu, node=self.fleet.gpus[gpu],  # type: ignore[arg-type]
            at=datetime.now(UTC), evidence={"injected": True},
        )  # fmt: skip
        await self.send(topics.TELEMETRY_FAULTS, fault)

    async def set_health(self, gpu: str, health: str, reason: str) -> None:
        previous = self.fleet.health.get(gpu, "healthy")
        if previous not in FROM_STATES[health]:
            return
        self.fleet.health[gpu] = health
        event = GpuHealthChangedV1(
            gpu_uuid=gpu,
            node=self.fleet.gpus[gpu],
            previous=previous,
            health=health,
            reason=reason,  # type: ignore[arg-type]
        )
        await self.send(topics.INVENTORY, event)

    async def on_drain(self, e: DrainRequestedV1) -> None:
        gpus = [e.gpu_uuid] if e.gpu_uuid else [g for g, n in self.fleet.gpus.items() if n == e.node]
        for gpu in gpus:
            self.bait.pop(gpu, None)
            await self.set_health(gpu, e.target, e.reason)

    def _drain_later(self, e: DrainRequestedV1) -> None:
        gpu = e.gpu_uuid
        free = gpu is not None and gpu not in set(self.fleet.workload_gpu.values())
        if self.late_budget > 0 and e.target == "failed" and free and not self.bait:
            # Hold this drain back (up to 3 s) so that a migration can land on the GPU first.
            assert gpu is not None
            self.bait[gpu] = e.incident_id
            self.later(3.0, self.on_drain(e))
            return
        self.later(self.rng.uniform(0.1, 0.5), self.on_drain(e))

    def _bait_target(self, avoid_node: str | None) -> str | None:
        used = set(self.fleet.workload_gpu.values())
        for gpu in self.bait:
            if self.fleet.gpus[gpu] != avoid_node and gpu not in used:
                return gpu
        return None

    async def on_migration(self, e: MigrationRequestedV1, *, retry: bool = False) -> None:
        w = e.workload_id
        if not retry:
            self.fleet.moves_pending[w] = self.fleet.moves_pending.get(w, 0) + 1
        avoid = self.fleet.gpus.get(e.away_from_gpu)
        bait = self._bait_target(avoid)
        target = bait or self.fleet.free_healthy(self.rng, avoid_node=avoid)
        if target is None:
            # Like the scheduler, queue the workload until a healthy GPU frees up.
            self.waits += 1
            self.later(1.0, self.on_migration(e, retry=True))
            return
        old = self.fleet.placement[w]
        new = f"{w}-p{int(old.rsplit('-p', 1)[1]) + 1}"
        tenant = e.tenant_id
        migrating = WorkloadMigratingV1(
            workload_id=w,
            tenant_id=tenant,
            from_placement_id=old,
            to_placement_id=new,
            incident_id=e.incident_id,
        )
        await self.send(topics.SCHEDULER, migrating)
        placed = self.placed_event(w, target, new)
        ended = WorkloadEndedV1(workload_id=w, tenant_id=tenant, placement_id=old, outcome="migrated")
        if bait is None:
            await self.send(topics.SCHEDULER, placed, tenant=tenant)
            await self.send(topics.SCHEDULER, ended, tenant=tenant)
        else:
            self._late(placed, ended, gpu=bait)
        delay = 0.0
        for phase, percent in PHASES:
            delay += self.rng.uniform(0.5, 3.0) if phase != "running" else 0.2
            step = MigrationStepV1(
                workload_id=w, tenant_id=tenant, placement_id=new, node=self.fleet.gpus[target],
                phase=phase, percent=percent,  # type: ignore[arg-type]
            )  # fmt: skip
            self.later(delay, self._step(step))

    def _late(self, placed: WorkloadPlacedV1, ended: WorkloadEndedV1, *, gpu: str) -> None:
        """The workload runs on a GPU about to fail; recovery hears of it once that GPU's incident closed."""
        incident = self.bait.pop(gpu)
        self.late_budget -= 1
        self.late_injected += 1
        self.held[incident] = [placed, ended]
        log(f"late placement: {placed.workload_id} on {gpu}, reported after {incident} closes")
        # The held-back drain lands now; the incident escalates (target failed) not knowing of it.
        drain = DrainRequestedV1(
            incident_id=incident, gpu_uuid=gpu, node=self.fleet.gpus[gpu], reason="late", target="failed"
        )
        self.later(0.1, self.on_drain(drain))
        self.later(30.0, self._release(incident))  # in case the close never comes

    async def _release(self, incident: str) -> None:
        for event in self.held.pop(incident, []):
            await self.send(topics.SCHEDULER, event, tenant=event.tenant_id)

    async def _step(self, step: MigrationStepV1) -> None:
        await self.send(topics.NODE_AGENT, step)
        if step.phase == "running":
            w = step.workload_id
            left = self.fleet.moves_pending.get(w, 0) - 1
            if left > 0:
                self.fleet.moves_pending[w] = left
            else:
                self.fleet.moves_pending.pop(w, None)

    async def respond(self, stop: asyncio.Event) -> None:
        consumer = create_consumer(
            bootstrap=self.bootstrap, group_id=f"{self.prefix}standins",
            topics=[f"{self.prefix}{topics.RECOVERY}"], client_id="bench-standins",
        )  # fmt: skip
        await consumer.start()
        try:
            while not stop.is_set():
                for records in (await consumer.getmany(timeout_ms=100)).values():
                    for record in records:
                        await self.handle(decode(record.value or b"", EVENT_TYPES)[1])
        finally:
            await consumer.stop()

    async def handle(self, event: Event) -> None:
        match event:
            case DrainRequestedV1():
                self._drain_later(event)
            case MigrationRequestedV1():
                if event.incident_id in self.fleet.closed:
                    self.moves_after_close += 1  # a workload found on hardware a closed incident drained
                self.later(self.rng.uniform(0.1, 0.3), self.on_migration(event))
            case ReturnToServiceRequestedV1():
                await self.set_health(event.gpu_uuid, "healthy", "returned by recovery")
            case IncidentClosedV1():
                self.fleet.closed[event.incident_id] = event
                await self._release(event.incident_id)

    def stranded(self) -> list[str]:
        """Workloads placed on a GPU that is not healthy (drained or failed)."""
        health = self.fleet.health
        return sorted(w for w, g in self.fleet.workload_gpu.items() if health.get(g, "healthy") != "healthy")

    def lost(self) -> int:
        """Workloads not running: stranded on an unhealthy GPU, or still waiting to be moved."""
        return len(set(self.stranded()) | set(self.fleet.moves_pending))


def start_service(env: BenchEnv, bootstrap: str, port: int) -> subprocess.Popen[bytes]:
    values = {
        "KAFKA_BOOTSTRAP_SERVERS": bootstrap, "KAFKA_TOPIC_PREFIX": env.topic_prefix,
        "DATABASE_URL": env.database_url, "DB_SCHEMA": env.schema("recovery"), "REDIS_URL": env.redis_url,
        "REDIS_PREFIX": f"bench:{env.token}:", "RECOVERY_HTTP_PORT": str(port), "LOG_LEVEL": "WARNING",
        "OUTBOX_POLL_INTERVAL_S": "0.1", "RECOVERY_SETTLE_S": "3", "RECOVERY_CONSUME_SAMPLES": "false",
        "RECOVERY_FOLD_WINDOW_S": "5", "RECOVERY_CORRELATION_WINDOW_S": "1",
    }  # fmt: skip
    return subprocess.Popen([sys.executable, "-m", "services.recovery"], env={**os.environ, **values})


async def wait_until(probe: Any, *, within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            if await probe():
                return
        await asyncio.sleep(0.2)
    raise TimeoutError(f"timed out waiting for {what}")


def _seconds(a: str | None, b: str | None) -> float | None:
    if a is None or b is None:
        return None
    return (datetime.fromisoformat(b) - datetime.fromisoformat(a)).total_seconds()


async def fetch_incidents(client: httpx.AsyncClient) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    while True:
        page = (await client.get(f"/v1/incidents?limit=500&offset={len(out)}")).json()
        out += page
        if len(page) < 500:
            return out


def report(
    incidents: list[dict[str, Any]], slo: dict[str, Any], *, sim: Sim, faults: int, wall: float
) -> None:
    detect = [_seconds(i["fault_at"], i["detected_at"]) or 0.0 for i in incidents]
    recover = [s for i in incidents if (s := _seconds(i["detected_at"], i["recovered_at"])) is not None]
    recoverable = [i for i in incidents if i["recoverable"] and i["action"] != "escalate"]

    emit(BENCH, "faults_injected", faults, "faults", gpus=len(sim.fleet.gpus))
    emit(BENCH, "incidents_opened", len(incidents), "incidents")
    emit(BENCH, "incidents_recoverable", len(recoverable), "incidents")
    for outcome in ("resolved", "escalated"):
        emit(BENCH, f"incidents_{outcome}", sum(1 for i in incidents if i["state"] == outcome), "incidents")
    emit(BENCH, "incidents_still_open", sum(1 for i in incidents if i["closed_at"] is None), "incidents")
    if detect:
        emit(BENCH, "time_to_detect_p50", percentile(detect, 50), "s")
        emit(BENCH, "time_to_detect_p99", percentile(detect, 99), "s")
    # Phases are compressed here and the thresholds are not: shares and times to recover come from part one.
    emit(BENCH, "incidents_recovered", len(recover), "incidents", phases="compressed about tenfold")
    not_running = sim.lost()
    for w in sorted(set(sim.stranded()) | set(sim.fleet.moves_pending)):
        gpu = sim.fleet.workload_gpu.get(w, "")
        state = "moving" if w in sim.fleet.moves_pending else sim.fleet.health.get(gpu, "healthy")
        log(f"not running: {w} on {gpu} ({state}), placement {sim.fleet.placement.get(w)}")
    emit(BENCH, "workloads_on_unhealthy_gpus", len(sim.stranded()), "workloads")
    emit(BENCH, "workloads_still_moving", len(sim.fleet.moves_pending), "workloads")
    emit(BENCH, "late_placements_injected", sim.late_injected, "placements")
    emit(BENCH, "migrations_requested_after_close", sim.moves_after_close, "migrations")
    healthy = sum(1 for g in sim.fleet.gpus if sim.fleet.health.get(g, "healthy") == "healthy")
    emit(BENCH, "healthy_gpus_at_end", healthy, "GPUs", workloads=len(sim.fleet.workload_gpu))
    if all(i["closed_at"] is not None for i in incidents):
        # Every incident ended: a workload not running now never will be, so it is lost.
        emit(BENCH, "workloads_lost", not_running, "workloads", workloads=len(sim.fleet.workload_gpu))
        emit(BENCH, "workloads_lost_vs_target", float(not_running == 0), "ok", target=0)
    else:
        # Incidents still open at the cut-off: their workloads may yet run, so "lost" cannot be judged.
        emit(BENCH, "workloads_not_running_at_cutoff", not_running, "workloads", lost="not judged")
    # The live endpoint counts the incidents the benchmark read (a check of the API, not a figure).
    emit(BENCH, "slo_api_incidents_match", float(slo["overall"]["incidents"] == len(incidents)), "ok")
    emit(BENCH, "migrations_queued_for_capacity", sim.waits, "retries")
    emit(BENCH, "wall_time", wall, "s")


async def run(args: argparse.Namespace, bootstrap: str) -> None:
    env, port = BenchEnv.create(), free_port()
    service = start_service(env, bootstrap, port)
    headers = {"X-API-Key": DEV_ADMIN_KEY}
    client = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=30)
    sim = Sim(args=args, bootstrap=bootstrap, prefix=env.topic_prefix)
    stop = asyncio.Event()
    pg = None
    try:
        await wait_until(lambda: _ready(client), within=60, what="recovery service ready")
        pg = await asyncpg.connect(env.database_url, server_settings={"search_path": env.schema("recovery")})
        await sim.producer.start()
        responders = asyncio.create_task(sim.respond(stop))
        placed = await sim.load()
        count = "SELECT count(*) FROM placements"
        await wait_until(lambda: _at_least(pg, count, placed), within=60, what="placements")
        log(f"{placed} workloads, {len(sim.fleet.gpus)} GPUs; {args.faults} faults at {args.rate}/s")
        start = time.monotonic()
        for i in range(args.faults):
            await sim.inject(i)
            await asyncio.sleep(max(0.0, start + (i + 1) / args.rate - time.monotonic()))
        await sim.producer.flush()
        still_open = "SELECT count(*) = 0 FROM incidents WHERE closed_at IS NULL"
        with contextlib.suppress(TimeoutError):
            await wait_until(
                lambda: pg.fetchval(still_open), within=args.drain_timeout, what="incidents closed"
            )
        with contextlib.suppress(TimeoutError):
            await wait_until(lambda: _true(not sim.fleet.moves_pending), within=10, what="moves done")
        wall = time.monotonic() - start
        slo = (await client.get("/v1/stats/slo?period=1h")).json()
        report(await fetch_incidents(client), slo, sim=sim, faults=args.faults, wall=wall)
        emit(BENCH, "service_cpu_time", cpu_seconds(service.pid), "s", load_avg_1m=os.getloadavg()[0])
        stop.set()
        await responders
    finally:
        stop.set()
        for task in list(sim.tasks):
            task.cancel()
        service.terminate()
        service.wait(timeout=20)
        await client.aclose()
        await sim.producer.stop()
        if pg is not None:
            await pg.execute(f'DROP SCHEMA IF EXISTS "{env.schema("recovery")}" CASCADE')
            await pg.close()


async def _ready(client: httpx.AsyncClient) -> bool:
    return (await client.get("/readyz")).status_code == 200


async def _at_least(pg: Any, sql: str, n: int) -> bool:
    return int(await pg.fetchval(sql)) >= n


async def _true(value: bool) -> bool:
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--gpus", type=int, default=1000)
    parser.add_argument("--faults", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=20.0, help="faults per second")
    parser.add_argument("--load", type=float, default=0.7, help="share of GPUs running a workload")
    parser.add_argument("--drain-timeout", type=float, default=30.0, help="wait for open incidents, s")
    parser.add_argument(
        "--late-placements", type=int, default=3, help="placements reported after their GPU's incident closed"
    )
    parser.add_argument("--part", choices=("both", "virtual", "process"), default="both")
    parser.add_argument(
        "--virtual-per-hour", type=float, default=120.0, help="part one: faults per hour of virtual time"
    )
    args = parser.parse_args()
    if args.part != "process":
        virtual = run_virtual(
            gpus=args.gpus, faults=args.faults, per_hour=args.virtual_per_hour, load=args.load, mix=MIX
        )
        asyncio.run(virtual)
    if args.part == "virtual":
        return
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if bootstrap:
        asyncio.run(run(args, bootstrap))
        return
    with EmbeddedBroker() as broker:
        asyncio.run(run(args, broker.bootstrap))


if __name__ == "__main__":
    main()
