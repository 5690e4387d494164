"""Reads what a schedule pass or a priority explanation needs from Postgres."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime

from services.scheduler.adapters.fleet_store import FleetStore
from services.scheduler.adapters.postgres import Conn, Pool
from services.scheduler.adapters.workload_store import WorkloadStore
from services.scheduler.domain.cluster import ClusterState, GpuView
from services.scheduler.domain.decisions import QueueEntry
from services.scheduler.domain.index import FreeIndex
from services.scheduler.domain.model import Workload
from services.scheduler.domain.priority import DecayedUsage, FairShareBook
from services.scheduler.domain.quota import QuotaLimits
from services.scheduler.domain.rows import allocation_of, gpu_view, limits_of, workload_of
from services.scheduler.domain.run import RunRequest
from services.scheduler.domain.stored import FairShareInputs, StoredGpu, StoredWorkload
from services.scheduler.service.context import SchedulerContext

__all__ = ["PassCache", "PassInputs", "fair_share_book", "load_book", "load_pass", "queue_entry"]


@dataclass(frozen=True, slots=True)
class PassInputs:
    """The cluster, the waiting queue with priorities, and every tenant's limits."""

    state: ClusterState
    queue: list[QueueEntry]
    quotas: dict[str, QuotaLimits]
    waiting: list[StoredWorkload]
    base: FreeIndex | None = None


async def load_book(conn: Conn, ctx: SchedulerContext, *, now: datetime) -> FairShareBook:
    """Fair-share inputs of every tenant at ``now``, from one snapshot (the pass's policy row)."""
    return fair_share_book((await FleetStore(conn).pass_policy()).fair_share, ctx, now=now)


@dataclass
class PassCache:
    """What the active placer keeps between passes; dropped when it stops leading.

    The parsed GPU view is reused while ``fleet_version`` (bumped in every GPU-changing transaction) has not
    moved, and each waiting workload's parsed spec (immutable once submitted) while it waits.
    """

    fleet_version: int | None = None
    gpu_rows: list[StoredGpu] = field(default_factory=list)
    views: tuple[GpuView, ...] | None = None
    base: FreeIndex | None = None
    workloads: dict[str, Workload] = field(default_factory=dict)

    def gpus(self) -> tuple[GpuView, ...]:
        """The GPU view of the rows read, built once per fleet version."""
        if self.views is None:
            self.views = tuple(gpu_view(r) for r in self.gpu_rows)
        return self.views

    def base_index(self) -> FreeIndex:
        """The free index of ``gpus()`` with nothing held, built once per GPU view."""
        if self.base is None:
            self.base = FreeIndex.from_cluster(ClusterState(gpus=self.gpus(), allocations=()))
        return self.base

    def workload(self, stored: StoredWorkload) -> Workload:
        """A waiting workload as the placement core sees it (spec parsed once per workload)."""
        w = self.workloads.get(stored.workload_id)
        if w is None or w.state.value != stored.state:
            w = self.workloads[stored.workload_id] = _with_run(workload_of(stored), stored)
        return w


def _with_run(workload: Workload, stored: StoredWorkload) -> Workload:
    """The workload with the run stored beside its spec (resolved at submission: the image reference a
    catalog change later does not move)."""
    if stored.run_spec is None:
        return workload
    return workload.model_copy(update={"run": RunRequest.model_validate(stored.run_spec)})


def fair_share_book(inputs: FairShareInputs, ctx: SchedulerContext, *, now: datetime) -> FairShareBook:
    """The fair-share book from stored usage, shares, tenants and capacity: placer pass and submit."""
    return FairShareBook(
        usage={t: DecayedUsage(v, at) for t, v, at in inputs.usage},
        shares=dict(inputs.shares),
        tenants=inputs.tenant_ids,
        default_shares=ctx.settings.default_shares,
        capacity_units=float(inputs.capacity),
        half_life=ctx.half_life,
        now=now,
    )


async def load_pass(
    pool: Pool, ctx: SchedulerContext, *, now: datetime, cache: PassCache | None = None
) -> PassInputs:
    """Everything one schedule pass decides over (GPU rows read again only when the fleet changed).

    The queue, the policy row and the live placements are read at once over three of the pool's
    connections (one round trip of waiting instead of three), each its own snapshot as the pass has
    always read them.
    """
    cache = cache or PassCache()
    store, fleet = WorkloadStore(pool), FleetStore(pool)
    waiting, policy, live_rows = await asyncio.gather(
        store.waiting(), fleet.pass_policy(), store.live_placements()
    )
    if not waiting:
        return PassInputs(state=ClusterState(gpus=(), allocations=()), queue=[], quotas={}, waiting=[])
    if policy.version != cache.fleet_version or cache.fleet_version is None:
        cache.gpu_rows, cache.views, cache.base = await fleet.gpus(), None, None
        cache.fleet_version = policy.version
    live = [p for p in live_rows if not p.migrating]
    state = ClusterState(gpus=cache.gpus(), allocations=tuple(allocation_of(p) for p in live))
    book = fair_share_book(policy.fair_share, ctx, now=now)
    queue = [queue_entry(stored, cache=cache, book=book) for stored in waiting]
    live_ids = {w.workload_id for w in waiting}
    for wid in [w for w in cache.workloads if w not in live_ids]:
        del cache.workloads[wid]
    quotas = {q.tenant_id: limits_of(q) for q in policy.quotas}
    return PassInputs(state=state, queue=queue, quotas=quotas, waiting=waiting, base=cache.base_index())


def queue_entry(stored: StoredWorkload, *, cache: PassCache, book: FairShareBook) -> QueueEntry:
    """A waiting workload's queue entry. Only while it migrates does it keep the priority it had and
    avoid the GPUs it moves away from (those matter for its target alone, never for anyone else)."""
    migrating = stored.state == "migrating"
    pinned = stored.pinned_priority if migrating else None
    priority = (
        float(pinned)
        if pinned is not None
        else book.explain(tenant=stored.tenant_id, urgency=stored.urgency).priority
    )
    avoid = frozenset(stored.avoid_gpus) if migrating else frozenset()
    return QueueEntry(workload=cache.workload(stored), priority=priority, avoid_gpus=avoid)
