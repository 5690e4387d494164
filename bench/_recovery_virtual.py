"""Recovery's SLO at real scale: recovery's own handlers and tick on a virtual clock, phases at real length.

Recovery's code runs as it does in the service (classify, fold, correlate, drain, migrate, verify, escalate;
the handlers, the state machine, the tick, the stores on a real Postgres schema), with the defaults of its
settings (3 min deadline, 10 min fold and correlation windows, 10 s settle, 1 s tick) and its clock handed
a virtual one. Around it, stand-ins play inventory, the scheduler and the node agent; their migration
phases last what the simulated fleet documents for real hardware (``migration_durations_s`` in
services/telemetry/adapters/sim/workloads.py): checkpoint 5 s + state / 2 GB/s (local NVMe write),
transfer 2 s + state / 1.25 GB/s (10 Gb/s), restore the profile's start-up delay (training 45 s,
inference 20 s, interactive 5 s; physics.py) + state / 3 GB/s, the state being the profile's share of an
80 GiB H100 (78 %, 45 %, 25 %). A workload its fault killed (a fatal XID, a lost GPU, OOM, an ECC burst)
is restored from its last checkpoint: transfer and restore only, as the simulated runner does.

Nothing is scaled: a virtual second is a second for the phases, the thresholds and recovery's timers
alike. The clock jumps from one due thing to the next (a delivery, a stand-in's step, the next tick at
which an incident can be due), so an hour of fleet time takes seconds of CPU.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from functools import partial
from typing import Any

import asyncpg

from bench.common import BenchEnv, emit, log
from libs.common.bus.handlers import HandlerContext
from libs.common.db import create_pool, migrate, service_migrations
from libs.common.events import EVENT_TYPES, Event, decode, envelop
from libs.common.events.agent import MigrationStepV1
from libs.common.events.inventory import GpuHealthChangedV1
from libs.common.events.recovery import (
    DrainRequestedV1,
    IncidentClosedV1,
    MigrationRequestedV1,
    ReturnToServiceRequestedV1,
)
from libs.common.events.scheduler import AllocationItem, WorkloadEndedV1, WorkloadPlacedV1
from libs.common.events.telemetry import FaultSignaledV1
from services.recovery.adapters.catalog_loader import load_catalog
from services.recovery.adapters.incident_queries import IncidentQueries
from services.recovery.adapters.unit_of_work import PostgresRecoveryUnitOfWork
from services.recovery.domain.catalog import Owner
from services.recovery.domain.incidents import Incident
from services.recovery.domain.slo import SloStats, by_fault_type, summarize
from services.recovery.service.handlers import RecoveryDeps, handlers
from services.recovery.service.loops import tick_in
from services.recovery.settings import RecoverySettings
from services.telemetry.adapters.sim.faults import WORKLOAD_FATAL_XIDS
from services.telemetry.adapters.sim.physics import PROFILES, ProfileKind
from services.telemetry.adapters.sim.workloads import migration_durations_s
from services.telemetry.domain.gpu_models import GPU_MODELS

__all__ = ["BENCH", "METHOD", "run_virtual"]

BENCH = "recovery.slo (real-scale phases, virtual time, nothing scaled)"
METHOD = {
    "real": "recovery's handlers, state machine, tick and stores (Postgres), default timings "
    "(deadline 180 s, grace 30 s, cap 360 s, fold/correlation 600 s, settle 10 s, tick 1 s)",
    "stand_ins": "inventory (drain/return after 0.1-0.5 s), scheduler (first free healthy GPU on another "
    "node after 0.1-0.3 s, queued 1 s when none), node agent (checkpoint/transfer/restore from the "
    "sim's documented real-scale durations: services/telemetry/adapters/sim/workloads.py "
    "migration_durations_s, 80 GiB H100, training/inference/interactive 50/35/15 %), detection "
    "0.2-1.5 s after the fault, 0.02-0.2 s per message hop",
    "scaled": "nothing: phases, thresholds and recovery's timers share one virtual clock",
    "measure": "detection to the host's running step of the last affected workload, per incident that "
    "affected a workload (services/recovery/domain/slo.py, the /v1/stats/slo code)",
}
ARTICLE_SHARE_3M = 0.92  # the article: 92 % of faults recovered within 3 minutes
GPUS_PER_NODE = 8
KINDS = (ProfileKind.TRAINING, ProfileKind.INFERENCE, ProfileKind.INTERACTIVE)
KIND_WEIGHTS = (50, 35, 15)  # share of workloads of each profile, %
MEMORY = GPU_MODELS["H100"].memory_bytes
# Inventory's health transitions (services/inventory/domain/health.py): target -> states it may start from.
FROM_STATES = {
    "draining": {"healthy", "degraded"},
    "failed": {"healthy", "degraded", "draining"},
    "healthy": {"draining", "failed", "degraded"},
}
DRAIN_OUTBOX = "WITH d AS (DELETE FROM outbox RETURNING seq, payload) SELECT payload FROM d ORDER BY seq"
NEXT_DUE = """
SELECT min(settle_until) FILTER (WHERE state = 'verifying'),
       min(detected_at) FILTER (WHERE closed_at IS NULL)
FROM incidents
"""


@dataclass
class World:
    """The stand-ins' view: GPU health, where each workload runs, and what killed it."""

    gpus: dict[str, str]  # gpu -> node
    health: dict[str, str] = field(default_factory=dict)
    at_gpu: dict[str, str] = field(default_factory=dict)  # workload -> gpu
    placement: dict[str, str] = field(default_factory=dict)
    kind: dict[str, ProfileKind] = field(default_factory=dict)
    killed: set[str] = field(default_factory=set)  # workloads the fault stopped: no checkpoint to take
    queued: int = 0

    def free_gpu(self, rng: random.Random, *, avoid_node: str | None) -> str | None:
        used = set(self.at_gpu.values())
        free = [
            g for g, n in self.gpus.items()
            if self.health.get(g, "healthy") == "healthy" and g not in used and n != avoid_node
        ]  # fmt: skip
        return rng.choice(free) if free else None


class VirtualRun:
    """A discrete-event run: a heap of (virtual instant, action), recovery's handlers fed from it."""

    def __init__(self, *, pool: Any, gpus: int, seed: int) -> None:
        self.pool, self.rng = pool, random.Random(seed)
        self.t0 = datetime(2026, 1, 1, tzinfo=UTC)
        self.now = self.t0
        self.settings = RecoverySettings(consume_samples=False)
        self.catalog = load_catalog()
        deps = RecoveryDeps(settings=self.settings, catalog=self.catalog, window=None, clock=lambda: self.now)
        self.table = handlers(deps).table
        self.deps = deps
        self.world = World(gpus={f"n{n:03d}-g{i}": f"n{n:03d}" for n in range(gpus // 8) for i in range(8)})
        self.heap: list[tuple[datetime, int, Callable[[], Awaitable[None]]]] = []
        self.seq = itertools.count()
        self.next_tick: datetime | None = None
        self.deliveries = 0

    def at(self, when: datetime, action: Callable[[], Awaitable[None]]) -> None:
        heapq.heappush(self.heap, (when, next(self.seq), action))

    def after(self, seconds: float, action: Callable[[], Awaitable[None]]) -> None:
        self.at(self.now + timedelta(seconds=seconds), action)

    def hop(self) -> float:
        return self.rng.uniform(0.02, 0.2)

    def send(self, event: Event, *, delay: float | None = None) -> None:
        """Deliver an event to recovery's handler after a message hop, its envelope stamped then."""

        async def deliver() -> None:
            handler = self.table.get(type(event))
            if handler is None:
                return
            envelope = envelop(event, source="bench-standin", time=self.now)
            async with PostgresRecoveryUnitOfWork(pool=self.pool, source="recovery") as uow:
                await handler(event, HandlerContext(envelope=envelope, uow=uow, deps=self.deps))
                await uow.commit()
            self.deliveries += 1

        self.after(self.hop() if delay is None else delay, deliver)

    async def tick(self) -> None:
        async with PostgresRecoveryUnitOfWork(pool=self.pool, source="recovery") as uow:
            await tick_in(uow, config=self.settings, now=self.now)
            await uow.commit()

    async def plan_tick(self) -> None:
        """The next tick at which anything can be due; the ticks between would find nothing to do."""
        settle, oldest_open = await self.pool.fetchrow(NEXT_DUE)
        due = [t for t in (settle, oldest_open and oldest_open + self.settings.policy.deadline) if t]
        if not due:
            self.next_tick = None
            return
        step = timedelta(seconds=self.settings.tick_s)
        after = max(min(due), self.now + timedelta(microseconds=1))
        self.next_tick = self.t0 + step * -(-(after - self.t0) // step)

    async def react(self) -> None:
        """Read recovery's outbox (in place of the relay) and hand each event to its stand-in."""
        for row in await self.pool.fetch(DRAIN_OUTBOX):
            event = decode(bytes(row["payload"]), EVENT_TYPES)[1]
            match event:
                case DrainRequestedV1():
                    self.after(self.rng.uniform(0.1, 0.5), partial(self.drain, event))
                case MigrationRequestedV1():
                    self.after(self.rng.uniform(0.1, 0.3), partial(self.replace, event))
                case ReturnToServiceRequestedV1():
                    self.set_health(event.gpu_uuid, "healthy", "returned by recovery")
                case IncidentClosedV1():
                    pass

    def set_health(self, gpu: str, health: str, reason: str) -> None:
        previous = self.world.health.get(gpu, "healthy")
        if previous not in FROM_STATES[health]:
            return  # as inventory: a change that does not apply says nothing
        self.world.health[gpu] = health
        node = self.world.gpus[gpu]
        event = GpuHealthChangedV1(gpu_uuid=gpu, node=node, previous=previous, health=health, reason=reason)  # type: ignore[arg-type]
        self.send(event)

    async def drain(self, e: DrainRequestedV1) -> None:
        gpus = [e.gpu_uuid] if e.gpu_uuid else [g for g, n in self.world.gpus.items() if n == e.node]
        for gpu in gpus:
            self.set_health(gpu, e.target, e.reason)

    def placed(self, workload: str, gpu: str, placement: str) -> WorkloadPlacedV1:
        self.world.at_gpu[workload], self.world.placement[workload] = gpu, placement
        item = AllocationItem(gpu_uuid=gpu, units=Decimal(1), model="H100-80GB-SXM")
        return WorkloadPlacedV1(
            workload_id=workload, tenant_id=f"t{int(workload[1:]) % 10}", placement_id=placement,
            node=self.world.gpus[gpu], allocations=[item], kind="job", priority=0.5,
        )  # fmt: skip

    async def replace(self, e: MigrationRequestedV1) -> None:
        w, world = e.workload_id, self.world
        target = world.free_gpu(self.rng, avoid_node=world.gpus.get(e.away_from_gpu))
        if target is None:
            world.queued += 1
            self.after(1.0, partial(self.replace, e))  # queued until a healthy GPU frees up
            return
        old = world.placement[w]
        new = f"{w}-p{int(old.rsplit('-p', 1)[1]) + 1}"
        tenant = e.tenant_id
        self.send(self.placed(w, target, new))
        self.send(WorkloadEndedV1(workload_id=w, tenant_id=tenant, placement_id=old, outcome="migrated"))
        self.play_migration(w, tenant=tenant, placement=new, gpu=target)

    def play_migration(self, w: str, *, tenant: str, placement: str, gpu: str) -> None:
        """The agent's steps at the sim's real-scale durations, each reported with its host instant."""
        kind = self.world.kind[w]
        steps = migration_durations_s(memory_bytes=int(PROFILES[kind].memory_fraction * MEMORY), kind=kind)
        if w in self.world.killed:
            steps = steps[1:]  # nothing left to checkpoint: restore the last checkpoint
            self.world.killed.discard(w)
        total, elapsed = sum(s for _, s in steps), 0.0
        reports: list[tuple[str, int, float]] = []
        for step_phase, seconds in steps:
            reports.append((step_phase.value, int(100 * elapsed / total), elapsed))
            elapsed += seconds
        reports.append(("running", 100, elapsed))
        node = self.world.gpus[gpu]
        for phase, percent, offset in reports:
            host_at = self.now + timedelta(seconds=offset)
            step = MigrationStepV1(
                workload_id=w, tenant_id=tenant, placement_id=placement, node=node,
                phase=phase, percent=percent, at=host_at,  # type: ignore[arg-type]
            )  # fmt: skip
            self.send(step, delay=offset + self.hop())

    def load(self, share: float) -> None:
        gpus = list(self.world.gpus)
        self.rng.shuffle(gpus)
        for i, gpu in enumerate(gpus[: int(len(gpus) * share)]):
            w = f"w{i}"
            self.world.kind[w] = self.rng.choices(KINDS, weights=KIND_WEIGHTS)[0]
            self.send(self.placed(w, gpu, f"{w}-p0"))

    def inject(self, i: int, mix: list[tuple[str, int | None, int]]) -> None:
        kind, xid, _ = self.rng.choices(mix, weights=[w for *_, w in mix])[0]
        world = self.world
        healthy = [g for g in world.gpus if world.health.get(g, "healthy") == "healthy"]
        busy = set(world.at_gpu.values())
        loaded = [g for g in healthy if g in busy]
        gpu = self.rng.choice(loaded if loaded and self.rng.random() < 0.85 else healthy)
        if kind in ("lost", "oom", "ecc") or (kind == "xid" and xid in WORKLOAD_FATAL_XIDS):
            world.killed |= {w for w, g in world.at_gpu.items() if g == gpu}
        fault = FaultSignaledV1(
            fault_id=f"f{i}", kind=kind, xid=xid, gpu_uuid=gpu, node=world.gpus[gpu],  # type: ignore[arg-type]
            at=self.now, evidence={"injected": True},
        )  # fmt: skip
        self.send(fault, delay=self.rng.uniform(0.2, 1.5))

    async def run_until_quiet(self, *, limit: datetime) -> None:
        """Pop due actions in virtual-time order, ticking when something can be due, until none is left."""
        while self.heap or self.next_tick is not None:
            when = self.heap[0][0] if self.heap else None
            if self.next_tick is not None and (when is None or self.next_tick <= when):
                self.now, self.next_tick = self.next_tick, None
                await self.tick()
            else:
                assert when is not None
                self.now, _, action = heapq.heappop(self.heap)
                await action()
            await self.react()
            await self.plan_tick()
            if self.now > limit:
                log(f"virtual run stopped at {self.now:%H:%M:%S} with work left")
                return


async def run_virtual(*, gpus: int, faults: int, per_hour: float, load: float, mix: Any) -> None:
    """Run the virtual fleet and emit the SLO lines, overall, for platform faults and per fault class."""
    env = BenchEnv.create()
    schema = env.schema("recovery_virtual")
    await migrate(dsn=env.database_url, schema=schema, migrations=service_migrations("recovery"))
    pool = await create_pool(dsn=env.database_url, schema=schema, max_size=2)
    try:
        run = VirtualRun(pool=pool, gpus=gpus, seed=11)
        run.load(load)
        gaps = itertools.accumulate(run.rng.expovariate(per_hour / 3600) for _ in range(faults))
        for i, gap in enumerate(gaps):
            run.at(run.t0 + timedelta(seconds=60 + gap), partial(_inject, run, i, mix))
        await run.run_until_quiet(limit=run.t0 + timedelta(days=30))
        async with pool.acquire() as conn:
            incidents = await IncidentQueries(conn).for_slo(since=run.t0, fault_type=None, tenant=None)
        report(incidents, run=run, faults=faults, per_hour=per_hour)
    finally:
        await pool.close()
        await pool_drop(env.database_url, schema)


async def _inject(run: VirtualRun, i: int, mix: Any) -> None:
    run.inject(i, mix)


async def pool_drop(dsn: str, schema: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


def _emit_stats(stats: SloStats, *, suffix: str = "") -> None:
    emit(BENCH, f"incidents_measured{suffix}", stats.measured, "incidents", of_incidents=stats.incidents)
    emit(BENCH, f"share_within_60s{suffix}", stats.share_within_1m or 0.0, "ratio")
    emit(BENCH, f"share_within_3m{suffix}", stats.share_within_3m or 0.0, "ratio")
    if stats.recover_p50_s is not None and stats.recover_p99_s is not None:
        emit(BENCH, f"detection_to_running_p50{suffix}", stats.recover_p50_s, "s")
        emit(BENCH, f"detection_to_running_p99{suffix}", stats.recover_p99_s, "s")


def _caused_by_workload(incident: Incident, entries: Any) -> bool:
    entry = entries.get(incident.fault_type)
    return entry is not None and entry.owner is Owner.APPLICATION


def report(incidents: list[Incident], *, run: VirtualRun, faults: int, per_hour: float) -> None:
    emit(BENCH, "method", 1, "method", **METHOD)
    span = (run.now - run.t0).total_seconds()
    emit(BENCH, "faults_injected", faults, "faults", gpus=len(run.world.gpus), per_hour=per_hour)
    emit(BENCH, "virtual_time_covered", span / 3600, "h")
    emit(BENCH, "incidents_still_open", sum(1 for i in incidents if i.is_open), "incidents")
    overall = summarize(incidents)
    _emit_stats(overall)
    share_3m = overall.share_within_3m or 0.0
    emit(BENCH, "share_within_3m_vs_article", share_3m / ARTICLE_SHARE_3M, "ratio", article=ARTICLE_SHARE_3M)
    entries = run.catalog.entries
    # Faults the workload caused itself (the catalog's owner: application) are the platform's to restart,
    # not its fault: the platform's figure leaves them out.
    platform = [i for i in incidents if not _caused_by_workload(i, entries)]
    _emit_stats(summarize(platform), suffix="[platform faults]")
    for fault_class, stats in by_fault_type(incidents).items():
        if stats.measured:
            _emit_stats(stats, suffix=f"[{fault_class}]")
    emit(BENCH, "migrations_queued_for_capacity", run.world.queued, "retries")
    emit(BENCH, "deliveries_to_recovery", run.deliveries, "events")
