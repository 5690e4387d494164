"""The one active placer: a leadership lease (`libs.common.db.leadership`) elects it; only its holder passes.

The lease's lock lives on a dedicated connection, so it goes the moment the holder's process dies and a
standby (retrying every ``lock_retry_s``) takes over; the holder confirms its lease after every pass and
steps down when its session is gone. Correctness never rests on the lock alone: each decision
re-checks the workload under a row lock, and unique indexes refuse a second live placement or a slot
held twice, so even two placers at once could not duplicate a placement.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter as Tally
from collections.abc import Iterable
from datetime import UTC, datetime

from prometheus_client import Counter, Gauge, Histogram

from libs.common.db.leadership import Lease, lead
from libs.common.db.pool import create_pool
from libs.common.observability.metrics import TENANT_REGISTRY
from libs.common.runtime import ServiceRuntime
from libs.common.stopping import sleep_or_stop, wait_for_wake
from services.scheduler.adapters.fleet_store import FleetStore
from services.scheduler.adapters.placer_session import PlacerSession
from services.scheduler.adapters.postgres import PostgresError
from services.scheduler.adapters.quota_store import HeldQuota, RebuildNeeded, RedisError
from services.scheduler.adapters.workload_store import WorkloadStore
from services.scheduler.domain.decisions import QueueEntry, QueuePosition
from services.scheduler.domain.rows import demand_of_grants, grant_of, limits_of
from services.scheduler.domain.schedule import schedule
from services.scheduler.domain.stored import WaitingWorkload
from services.scheduler.service.commit import commit_placements, commit_preemption, expire_preemption
from services.scheduler.service.context import SchedulerContext
from services.scheduler.service.pacing import (
    COALESCE_FROM_S,
    COALESCE_FROM_WAITING,
    PassClock,
    coalesce,
    defer_waiting,
)
from services.scheduler.service.pass_inputs import PassCache, load_pass

__all__ = ["PENDING", "Placer", "rebuild_quotas", "record_pending", "run_pass"]

log = logging.getLogger(__name__)

#: The placer's pool: a pass reads its three inputs at once, on three connections (pass_inputs.py).
PLACER_POOL_MAX = 4
IS_LEADER = Gauge("scheduler_placer_leader", "1 while this replica holds the placer lock")
PASSES = Counter("scheduler_passes_total", "Schedule passes run")
PLACED = Counter("scheduler_placements_total", "Placements committed")
PASS_SECONDS = Histogram("scheduler_pass_seconds", "Duration of one schedule pass")
PENDING = Gauge(
    "scheduler_pending_workloads",
    "Workloads left waiting by the last schedule pass, by tenant",
    ["tenant"],
    registry=TENANT_REGISTRY,  # tenant ids: served to admins only (/metrics/tenants)
)
#: The longest pause between back-to-back passes.
_MAX_YIELD_S = 0.01
#: How often the placer checks the Redis quota state and ends preemptions whose grace is over.
_HOUSEKEEPING_S = 0.2
#: The shortest time between two give-backs of ended placements' quota (a stream of passes shares one).
_RELEASE_EVERY_S = 0.1
#: Ended placements given back per round trip (one give-back takes as many rounds as it needs).
_RELEASE_BATCH = 1000
QUOTA_REBUILDS = Counter("scheduler_quota_rebuilds_total", "Quota state rebuilt from Postgres")


async def rebuild_quotas(ctx: SchedulerContext) -> None:
    """Rebuild Redis quota state (limits and live placements' demand) from Postgres."""
    async with ctx.pool_for_placer.acquire() as conn:
        limits = {q.tenant_id: limits_of(q) for q in await FleetStore(conn).quotas()}
        live = await WorkloadStore(conn).live_placements()
    held = [
        HeldQuota(p.tenant_id, p.placement_id, demand_of_grants(grant_of(g) for g in p.grants)) for p in live
    ]
    await ctx.quotas.rebuild(limits=limits, held=held)
    QUOTA_REBUILDS.inc()
    log.info(
        "quota state rebuilt from Postgres: %d tenants limited, %d live placements", len(limits), len(held)
    )


async def _release_ended(ctx: SchedulerContext) -> int:
    """Give back the quota of placements that ended since (idempotent per placement in Redis)."""
    released = 0
    async with ctx.pool_for_placer.acquire() as conn:
        store = WorkloadStore(conn)
        while rows := await store.unreleased(limit=_RELEASE_BATCH):
            await ctx.quotas.release_many([(r.tenant_id, r.placement_id) for r in rows])
            await store.mark_released([r.placement_id for r in rows])
            released += len(rows)
            if len(rows) < _RELEASE_BATCH:
                break
    return released


def _changed(stored: WaitingWorkload, q: QueuePosition) -> bool:
    return bool(
        stored.position != q.position
        or stored.priority != q.priority
        or stored.wait_reason != q.reason.value
        or stored.estimated_start != q.estimated_start
    )


async def run_pass(
    ctx: SchedulerContext,
    *,
    now: datetime,
    cache: PassCache | None = None,
    housekeeping: bool = True,
    lag_waiting: bool = False,
) -> int:
    """One schedule pass: expired preemptions, then every decision committed; returns placements.

    ``housekeeping``: first make sure the Redis quota state is intact and end the preemptions whose grace
    is over. The placer does that at most every ``_HOUSEKEEPING_S``, not on every pass of a stream of
    submissions; a quota state lost meanwhile is still caught by the reservation itself (``RebuildNeeded``).
    The pass's reads run at once on the placer's pool; its placements commit in chunks
    (``commit_placements``). ``lag_waiting`` (the placer's loop, which clears ``ctx.wake`` before each
    pass): a pass that placed work and was woken meanwhile may leave the queue positions to the next
    (``_defer_waiting``). Giving back the quota of ended placements is not part of it (see
    ``Placer._release_soon``).
    """
    if housekeeping:
        if not await ctx.quotas.intact():
            await rebuild_quotas(ctx)
        for pid in await WorkloadStore(ctx.pool_for_placer).expired_preemptions(now=now):
            await expire_preemption(ctx, pid, now=now)
    clock = PassClock()
    inputs = await load_pass(ctx.pool_for_placer, ctx, now=now, cache=cache)
    ctx.left_waiting = len(inputs.queue)
    if not inputs.queue:
        record_pending(inputs.queue, ())
        return 0
    clock.mark("read")
    decisions = schedule(
        inputs.queue, inputs.state, now=now, config=ctx.config(), quotas=inputs.quotas, base_index=inputs.base
    )
    clock.mark("decided")
    gpus = {g.uuid: g for g in inputs.state.gpus}
    workloads = {e.workload.id: e.workload for e in inputs.queue}
    traces = {w.workload_id: w.traceparent for w in inputs.waiting}
    placed = await commit_placements(ctx, decisions.placements, workloads, now=now, gpus=gpus, traces=traces)
    for proposal in decisions.preemptions:
        await commit_preemption(ctx, proposal)
    clock.mark("committed")
    rows = {w.workload_id: w for w in inputs.waiting}
    waiting = [
        (q.workload_id, q.position, q.priority, q.reason.value, q.estimated_start)
        for q in decisions.waiting
        if q.workload_id not in rows or _changed(rows[q.workload_id], q)
    ]
    if lag_waiting and defer_waiting(ctx, cache, placed=placed):
        waiting = []
    await WorkloadStore(ctx.pool_for_placer).record_waiting(waiting)
    clock.mark("recorded")
    clock.report(waiting=len(inputs.queue), placed=placed, rewritten=len(waiting))
    ctx.left_waiting = len(decisions.waiting)
    record_pending(inputs.queue, decisions.waiting)
    PLACED.inc(placed)
    return placed


def record_pending(queue: Iterable[QueueEntry], waiting: Iterable[QueuePosition]) -> None:
    """Set the pending gauge from one pass: every tenant it saw, or had seen, at what the pass left waiting.

    A tenant whose work was all placed reads 0 rather than vanishing, so a sum over tenants stays a
    series; the gauge costs no query of its own, only what the pass already read.
    """
    tenants = {e.workload.id: e.workload.tenant for e in queue}
    left = Tally(tenants[q.workload_id] for q in waiting if q.workload_id in tenants)
    seen = {sample.labels["tenant"] for metric in PENDING.collect() for sample in metric.samples}
    for tenant in seen | set(tenants.values()):
        PENDING.labels(tenant).set(left[tenant])


class Placer:
    """The background task: become placer when the lock is free, then pass on wake-ups and intervals."""

    def __init__(self, ctx: SchedulerContext) -> None:
        self._ctx = ctx
        self._lock_key = f"gpucloud.scheduler.placer.{ctx.settings.pg_schema}"
        self._cache = PassCache()
        self._releasing: asyncio.Task[None] | None = None
        self._housekeeping_at = 0.0
        self._released_at = 0.0

    async def __call__(self, runtime: ServiceRuntime, stop: asyncio.Event) -> None:
        session = await PlacerSession.connect(
            self._ctx.settings.session_database_url, schema=self._ctx.settings.pg_schema
        )
        retry = lambda: sleep_or_stop(stop, self._ctx.settings.lock_retry_s)  # noqa: E731  # between tries
        try:
            while not stop.is_set():
                async with lead(session.conn, key=self._lock_key, stop=stop, wait=retry) as lease:
                    if lease is not None:
                        await self._lead(session, lease, stop)
        finally:
            self._ctx.is_leader = False
            IS_LEADER.set(0)
            with contextlib.suppress(Exception):
                await session.close()

    async def _lead(self, session: PlacerSession, lease: Lease, stop: asyncio.Event) -> None:
        ctx = self._ctx
        schema = ctx.settings.pg_schema

        def on_notify(payload: str) -> None:
            if payload == schema:
                ctx.wake.set()

        await session.listen(on_notify)
        ctx.is_leader = True
        IS_LEADER.set(1)
        log.info("this replica is now the active placer")
        ctx.placer_pool = await create_pool(
            dsn=ctx.settings.service_database_url,
            schema=schema,
            max_size=PLACER_POOL_MAX,
            stateless=True,
            queue_reads=True,
            pooled=ctx.settings.pooled,
        )
        await rebuild_quotas(ctx)  # a predecessor may have died between a Redis reserve and its commit
        self._cache = PassCache()  # rebuilt from Postgres at each takeover
        try:
            while not stop.is_set():
                ctx.wake.clear()
                started = asyncio.get_running_loop().time()
                await self._one_pass()
                await lease.confirm()  # the lock's session must still be alive: else a standby places
                elapsed = asyncio.get_running_loop().time() - started
                if ctx.wake.is_set():
                    # Woken during the pass (a stream of submissions): leave the loop to the requests,
                    # consumers and relay for half the pass's length, and decide what came meanwhile in
                    # one batch, instead of back-to-back passes starving them of CPU.
                    await sleep_or_stop(stop, min(elapsed / 2, _MAX_YIELD_S))
                await wait_for_wake(stop, ctx.wake, ctx.settings.pass_interval_s)
                backlog = ctx.left_waiting >= COALESCE_FROM_WAITING
                if backlog and elapsed >= COALESCE_FROM_S and ctx.wake.is_set():
                    await coalesce(stop, ctx.wake, last_pass_s=elapsed)
        finally:
            ctx.is_leader = False
            IS_LEADER.set(0)
            PENDING.clear()  # only the active placer knows the queue: a standby reports none
            if self._releasing is not None:
                await asyncio.gather(self._releasing, return_exceptions=True)
                self._releasing = None
            pool, ctx.placer_pool = ctx.placer_pool, None
            if pool is not None:
                await pool.close()
            with contextlib.suppress(Exception):
                await session.unlisten()

    async def _one_pass(self) -> None:
        clock = asyncio.get_running_loop().time()
        housekeeping = clock >= self._housekeeping_at
        if housekeeping:
            self._housekeeping_at = clock + _HOUSEKEEPING_S
        with PASS_SECONDS.time():
            try:
                await run_pass(
                    self._ctx,
                    now=datetime.now(UTC),
                    cache=self._cache,
                    housekeeping=housekeeping,
                    lag_waiting=True,
                )
            except RebuildNeeded:
                await rebuild_quotas(self._ctx)
                self._ctx.wake.set()  # what that pass could not reserve is decided again at once
        self._ctx.passes += 1
        PASSES.inc()
        self._release_soon()

    def _release_soon(self) -> None:
        """Give back the quota of placements that ended, beside the next pass rather than inside this one.

        Off the path from a submission to its placement: until it runs, Redis still counts an ended
        placement against its tenant, which can only refuse a reservation, never allow one too many
        (reserve and release are atomic scripts, idempotent per placement). When it gave anything back
        while the last pass left work waiting, the placer is woken, so that work is placed at once. It
        runs at most every ``_RELEASE_EVERY_S``: a stream of passes shares one give-back.
        """
        if self._releasing is not None and not self._releasing.done():
            return
        self._releasing = asyncio.create_task(self._release())

    async def _release(self) -> None:
        loop = asyncio.get_running_loop()
        await asyncio.sleep(max(0.0, self._released_at + _RELEASE_EVERY_S - loop.time()))
        self._released_at = loop.time()
        try:
            if await _release_ended(self._ctx) and self._ctx.left_waiting:
                self._ctx.wake.set()
        except RebuildNeeded:
            self._ctx.wake.set()  # the next pass rebuilds quota state from Postgres
        except (OSError, PostgresError, RedisError) as exc:
            log.warning("releasing ended placements' quota failed, retried after the next pass: %s", exc)
