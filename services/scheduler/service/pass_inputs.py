"""Reads what a schedule pass or a priority explanation needs from Postgres."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from services.scheduler.adapters.fleet_store import FleetStore
from services.scheduler.adapters.postgres import Conn, Pool
from services.scheduler.adapters.workload_store import WorkloadStore
from services.scheduler.domain.cluster import Allocation, ClusterState, GpuView
from services.scheduler.domain.decisions import QueueEntry
from services.scheduler.domain.index import FreeIndex
from services.scheduler.domain.model import Workload
from services.scheduler.domain.priority import DecayedUsage, FairShareBook
from services.scheduler.domain.quota import QuotaLimits
from services.scheduler.domain.rows import allocation_of, gpu_view, limits_of, workload_of
from services.scheduler.domain.run import RunRequest
from services.scheduler.domain.stored import (
    FairShareInputs,
    StoredGpu,
    StoredPlacement,
    StoredWorkload,
    WaitingWorkload,
)
from services.scheduler.service.context import SchedulerContext

__all__ = ["PassCache", "PassInputs", "fair_share_book", "load_book", "load_pass", "queue_entry"]


@dataclass(frozen=True, slots=True)
class PassInputs:
    """The cluster, the waiting queue with priorities, and every tenant's limits."""

    state: ClusterState
    queue: list[QueueEntry]
    quotas: dict[str, QuotaLimits]
    waiting: list[WaitingWorkload]
    base: FreeIndex | None = None


async def load_book(conn: Conn, ctx: SchedulerContext, *, now: datetime) -> FairShareBook:
    """Fair-share inputs of every tenant at ``now``, from one snapshot (the pass's policy row)."""
    return fair_share_book((await FleetStore(conn).pass_policy()).fair_share, ctx, now=now)


@dataclass
class PassCache:
    """What the active placer keeps between passes; dropped when it stops leading.

    The parsed GPU view is reused while ``fleet_version`` (bumped in every GPU-changing statement) has not
    moved; when it has, only the GPUs changed since are read and parsed again (``update_gpus``). Each
    waiting workload's parsed spec (immutable once submitted) is kept while it waits: a pass reads the
    request of a workload it has not seen waiting in this state, and only that one. Each live placement is
    kept with its row version and its allocation: a pass reads every live placement's id and version (a
    short row each) and the whole row only of those new or changed since (``live``).
    """

    fleet_version: int | None = None
    #: Each GPU read, by UUID, with its view.
    gpu_views: dict[str, tuple[StoredGpu, GpuView]] = field(default_factory=dict)
    views: tuple[GpuView, ...] | None = None
    base: FreeIndex | None = None
    workloads: dict[str, Workload] = field(default_factory=dict)
    #: Since when (monotonic seconds) passes have left the stored queue positions behind, or None.
    waiting_stale_since: float | None = None
    #: Each live placement read, by id: its row version, the row and its allocation.
    placements: dict[str, tuple[str, StoredPlacement, Allocation]] = field(default_factory=dict)

    async def live(self, store: WorkloadStore, versions: list[tuple[str, str]]) -> list[StoredPlacement]:
        """The live placements ``versions`` lists (as ``live_placement_versions`` read them), from the
        rows kept where the version is the one kept, read again where not (one statement for all)."""
        listed = dict(versions)
        for pid in [pid for pid, kept in self.placements.items() if listed.get(pid) != kept[0]]:
            del self.placements[pid]  # ended, or changed since it was read
        unread = [pid for pid in listed if pid not in self.placements]
        if unread:
            for version, row in await store.live_placements_by_id(unread):
                self.placements[row.placement_id] = (version, row, allocation_of(row))
        # One that ended between the two reads is not read, so not kept: it is not live.
        return [self.placements[pid][1] for pid in listed if pid in self.placements]

    def allocation(self, placement: StoredPlacement) -> Allocation:
        """A kept placement's allocation, built once per row version."""
        return self.placements[placement.placement_id][2]

    def update_gpus(self, rows: Iterable[StoredGpu], *, every: bool = False) -> None:
        """Take these GPU rows (``every``: all there are; else those changed since), parsing only rows that
        differ from the ones kept."""
        kept = {} if every else self.gpu_views
        for row in rows:
            old = self.gpu_views.get(row.gpu_uuid)
            kept[row.gpu_uuid] = old if old is not None and old[0] == row else (row, gpu_view(row))
        self.gpu_views, self.views, self.base = kept, None, None

    def gpus(self) -> tuple[GpuView, ...]:
        """The GPU view of the rows read, by node then UUID, built once per fleet version."""
        if self.views is None:
            ordered = sorted(self.gpu_views.values(), key=lambda rv: (rv[0].node, rv[0].gpu_uuid))
            self.views = tuple(view for _row, view in ordered)
        return self.views

    def base_index(self) -> FreeIndex:
        """The free index of ``gpus()`` with nothing held, built once per GPU view."""
        if self.base is None:
            self.base = FreeIndex.from_cluster(ClusterState(gpus=self.gpus(), allocations=()))
        return self.base

    def workload(self, waiting: WaitingWorkload) -> Workload | None:
        """A waiting workload as the placement core sees it, or None until its request was read (``keep``)."""
        w = self.workloads.get(waiting.workload_id)
        return w if w is not None and w.state.value == waiting.state else None

    def keep(self, stored: StoredWorkload) -> None:
        """Parse a workload's request once (its state as read with it)."""
        self.workloads[stored.workload_id] = _with_run(workload_of(stored), stored)


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
    """Everything one schedule pass decides over (GPU rows read again only when, and where, the fleet
    changed).

    The queue, the policy row and the live placements' versions are read at once over three of the
    pool's connections (one round trip of waiting instead of three), each its own snapshot as the pass has
    always read them; the placements new or changed since the last pass are read whole after.
    """
    cache = cache or PassCache()
    store, fleet = WorkloadStore(pool), FleetStore(pool)
    waiting, policy, versions = await asyncio.gather(
        store.waiting(), fleet.pass_policy(), store.live_placement_versions()
    )
    if not waiting:
        return PassInputs(state=ClusterState(gpus=(), allocations=()), queue=[], quotas={}, waiting=[])
    if cache.fleet_version is None:
        cache.update_gpus(await fleet.gpus(), every=True)
    elif policy.version != cache.fleet_version:
        # Versions follow commit order, and this read's snapshot is no older than the policy row's: it
        # holds every change up to ``policy.version`` (a later one it holds too is read again next time).
        cache.update_gpus(await fleet.gpus_since(cache.fleet_version))
    cache.fleet_version = policy.version
    live = [p for p in await cache.live(store, versions) if not p.migrating]
    state = ClusterState(gpus=cache.gpus(), allocations=tuple(cache.allocation(p) for p in live))
    book = fair_share_book(policy.fair_share, ctx, now=now)
    unread = [w.workload_id for w in waiting if cache.workload(w) is None]
    if unread:
        for stored in await store.workloads_by_id(unread):
            cache.keep(stored)
    # A workload whose state moved between the two reads waits for the next pass.
    waiting = [w for w in waiting if cache.workload(w) is not None]
    priorities: dict[tuple[str, float], float] = {}  # one book, one priority per tenant and urgency
    queue = [queue_entry(w, cache=cache, book=book, priorities=priorities) for w in waiting]
    live_ids = {w.workload_id for w in waiting}
    for wid in [w for w in cache.workloads if w not in live_ids]:
        del cache.workloads[wid]
    quotas = {q.tenant_id: limits_of(q) for q in policy.quotas}
    return PassInputs(state=state, queue=queue, quotas=quotas, waiting=waiting, base=cache.base_index())


def queue_entry(
    stored: WaitingWorkload,
    *,
    cache: PassCache,
    book: FairShareBook,
    priorities: dict[tuple[str, float], float] | None = None,
) -> QueueEntry:
    """A waiting workload's queue entry. Only while it migrates does it keep the priority it had and
    avoid the GPUs it moves away from (those matter for its target alone, never for anyone else).
    ``priorities``: what ``book`` gave each tenant and urgency already (a job array's thousands share
    one), filled as it goes."""
    migrating = stored.state == "migrating"
    pinned = stored.pinned_priority if migrating else None
    if pinned is not None:
        priority = float(pinned)
    else:
        memo = {} if priorities is None else priorities
        key = (stored.tenant_id, stored.urgency)
        if key not in memo:
            memo[key] = book.explain(tenant=stored.tenant_id, urgency=stored.urgency).priority
        priority = memo[key]
    avoid = frozenset(stored.avoid_gpus) if migrating else frozenset()
    workload = cache.workload(stored)
    assert workload is not None  # load_pass kept every waiting workload's request
    return QueueEntry(workload=workload, priority=priority, avoid_gpus=avoid)
