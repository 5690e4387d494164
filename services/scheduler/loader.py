"""Reads what a schedule pass or a priority explanation needs from Postgres."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from services.scheduler.cluster import ClusterState
from services.scheduler.context import SchedulerContext
from services.scheduler.decisions import QueueEntry
from services.scheduler.priority import DecayedUsage
from services.scheduler.quota import QuotaLimits
from services.scheduler.state import FairShareBook, allocation_of, gpu_view, limits_of, workload_of
from services.scheduler.store import Store
from services.scheduler.store_fleet import FleetStore

__all__ = ["PassInputs", "load_book", "load_pass"]


@dataclass(frozen=True, slots=True)
class PassInputs:
    """The cluster, the waiting queue with priorities, and every tenant's limits."""

    state: ClusterState
    queue: list[QueueEntry]
    quotas: dict[str, QuotaLimits]


async def load_book(
    conn: asyncpg.Connection[Any] | asyncpg.Pool[Any], ctx: SchedulerContext, *, now: datetime,
    gpu_rows: list[asyncpg.Record] | None = None,
) -> FairShareBook:  # fmt: skip
    """Fair-share inputs of every tenant at ``now``."""
    fleet = FleetStore(conn)
    if gpu_rows is not None:
        capacity = sum(float(r["units"]) for r in gpu_rows if r["health"] == "healthy")
    else:
        capacity = await fleet.healthy_units()
    usage = {
        r["tenant_id"]: DecayedUsage(float(r["decayed_unit_hours"]), r["as_of"])
        for r in await fleet.all_usage()
    }
    return FairShareBook(
        usage=usage,
        shares=await fleet.shares(),
        tenants=frozenset(await fleet.tenant_ids()),
        default_shares=ctx.settings.default_shares,
        capacity_units=capacity,
        half_life=ctx.half_life,
        now=now,
    )


async def load_pass(conn: asyncpg.Connection[Any], ctx: SchedulerContext, *, now: datetime) -> PassInputs:
    """Everything one schedule pass decides over."""
    store, fleet = Store(conn), FleetStore(conn)
    waiting = await store.waiting()
    avoid = frozenset(g for r in waiting for g in r["avoid_gpus"])
    gpu_rows = await fleet.gpus()
    live = [r for r in await store.live_placements() if not r["migrating"]]
    state = ClusterState(
        gpus=tuple(gpu_view(r, avoid=avoid) for r in gpu_rows),
        allocations=tuple(allocation_of(r) for r in live),
    )
    book = await load_book(conn, ctx, now=now, gpu_rows=gpu_rows)
    queue = []
    for row in waiting:
        pinned = row["pinned_priority"]
        prio = (
            float(pinned)
            if pinned is not None
            else book.explain(tenant=row["tenant_id"], urgency=row["urgency"]).priority
        )
        queue.append(QueueEntry(workload=workload_of(row), priority=prio))
    quotas = {r["tenant_id"]: limits_of(r) for r in await fleet.quotas()}
    return PassInputs(state=state, queue=queue, quotas=quotas)
