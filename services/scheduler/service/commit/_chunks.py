"""A pass's placements committed in chunks: one quota script and one statement per chunk of them."""

from __future__ import annotations

import asyncio
import functools
import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from libs.common.db.uow import OutboxRow, outbox_row
from services.scheduler.adapters.postgres import PostgresError
from services.scheduler.adapters.workload_store import WorkloadStore
from services.scheduler.domain.cluster import GpuView
from services.scheduler.domain.decisions import Placement
from services.scheduler.domain.model import Workload, WorkloadState
from services.scheduler.domain.rows import demand_of_grants
from services.scheduler.service.commit._one import commit_placement, placed_event, placement_row
from services.scheduler.service.context import SchedulerContext
from services.scheduler.service.trace import batch_trace

__all__ = ["CHUNK", "commit_placements"]

log = logging.getLogger(__name__)

#: Placements per transaction when a pass commits many (a backlog meeting new capacity): large enough that
#: a round trip serves hundreds, small enough that one transaction stays short and the relay can publish
#: the first placements while the next are written.
CHUNK = 1000
#: Placed events built between two yields to the loop while a chunk is built.
_YIELD_EVERY = 100


@dataclass(frozen=True, slots=True)
class _Chunk:
    """One transaction's worth of placements, built before it is written: ids, rows, slots, events."""

    batch: list[tuple[Placement, Workload, str]]
    rows: list[dict[str, Any]]
    slots: list[tuple[str, str, str]]
    outbox: list[tuple[str, OutboxRow]]


async def commit_placements(
    ctx: SchedulerContext,
    placements: Sequence[Placement],
    workloads: Mapping[str, Workload],
    *,
    now: datetime,
    gpus: dict[str, GpuView],
    traces: Mapping[str, str | None] | None = None,
    chunk: int = CHUNK,
) -> int:
    """Commit a pass's placements in chunks of ``chunk``, each with its quota reservations and events.

    Two round trips per chunk: the quota of its decisions reserved in one Redis script (each checked
    after the ones before it), then one statement, its own transaction, that places the workloads still
    queued (``traces``: each one's traceparent, for its event). Reservations of workloads no longer queued
    (cancelled meanwhile) are given back. All or nothing per chunk: when its statement fails (a slot taken
    meanwhile), the chunk's reservations are given back and each of its placements is retried alone, as
    ``commit_placement`` does; chunks committed before stay committed, and the next chunks go on. The next
    chunk's rows and events are built while the database writes this one. A migrating workload (old
    placement to leave) always goes alone, after the chunks. Returns how many were placed.
    """
    if not placements:
        return 0
    alone = [p for p in placements if workloads[p.workload_id].state is WorkloadState.MIGRATING]
    batch = [p for p in placements if workloads[p.workload_id].state is not WorkloadState.MIGRATING]
    parts = [batch[i : i + chunk] for i in range(0, len(batch), max(chunk, 1))]
    placed = 0
    build = functools.partial(_build, ctx, workloads=workloads, now=now, gpus=gpus, traces=traces or {})
    ready = await build(parts[0]) if parts else None
    for n, part in enumerate(parts):
        assert ready is not None
        writing = asyncio.create_task(_write_chunk(ctx, ready))
        try:
            ready = await build(parts[n + 1]) if n + 1 < len(parts) else None
        finally:
            written = await _settled(writing)
        if written is None:
            placed += await _one_at_a_time(ctx, part, workloads, now=now, gpus=gpus)
        else:
            placed += written
    return placed + await _one_at_a_time(ctx, alone, workloads, now=now, gpus=gpus)


async def _settled(writing: asyncio.Task[int]) -> int | None:
    """A chunk's placements, or None when the database refused its statement (logged)."""
    try:
        return await writing
    except PostgresError as exc:
        log.warning("a chunk of placements was refused (%s); placing them one at a time", exc)
        return None


async def _one_at_a_time(
    ctx: SchedulerContext,
    placements: Sequence[Placement],
    workloads: Mapping[str, Workload],
    *,
    now: datetime,
    gpus: dict[str, GpuView],
) -> int:
    placed = 0
    for p in placements:
        if await commit_placement(ctx, p, workloads[p.workload_id], now=now, gpus=gpus):
            placed += 1
    return placed


async def _build(
    ctx: SchedulerContext,
    placements: Sequence[Placement],
    *,
    workloads: Mapping[str, Workload],
    now: datetime,
    gpus: dict[str, GpuView],
    traces: Mapping[str, str | None],
) -> _Chunk:
    """A chunk's placement ids, rows, held slots and outbox rows; each placed event is emitted in its
    workload's submission trace (one span per trace: an array's items share their request's). It yields
    to the loop every ``_YIELD_EVERY`` placements, so the chunk being written meanwhile goes on from its
    reservation to its statement while this one is built."""
    batch = [(p, workloads[p.workload_id], f"pl-{uuid.uuid4().hex[:16]}") for p in placements]
    rows, slots, outbox = [], [], []
    by_trace: dict[str | None, list[tuple[Placement, Workload, str]]] = {}
    await asyncio.sleep(0)
    for item in batch:
        p, w, pid = item
        rows.append(placement_row(p, w, pid=pid, now=now, gpus=gpus))
        slots += [(gpu, slot, pid) for gpu, slot in (g.key for g in p.grants)]
        by_trace.setdefault(traces.get(w.id), []).append(item)
    source = ctx.settings.service_name
    for traceparent, items in by_trace.items():
        ids = [w.id for _p, w, _pid in items]
        with batch_trace(workload_ids=ids, traceparent=traceparent, name="scheduler.place"):
            for n, (p, w, pid) in enumerate(items, start=1):
                event = placed_event(p, w, pid=pid, gpus=gpus)
                outbox.append((w.id, outbox_row(event, source=source, tenant=w.tenant)))
                if n % _YIELD_EVERY == 0:
                    await asyncio.sleep(0)
    return _Chunk(batch=batch, rows=rows, slots=slots, outbox=outbox)


async def _write_chunk(ctx: SchedulerContext, chunk: _Chunk) -> int:
    """Reserve the chunk's quota, then place what the reservation admitted and is still queued."""
    answers = await ctx.quotas.reserve_many(
        [(w.tenant, pid, demand_of_grants(p.grants)) for p, w, pid in chunk.batch]
    )
    refused = {pid for (_p, _w, pid), exceeded in zip(chunk.batch, answers, strict=True) if exceeded}
    kept = [(w, pid) for _p, w, pid in chunk.batch if pid not in refused]
    if not kept:
        return 0
    try:
        placed = await WorkloadStore(ctx.pool_for_placer).place_many(
            rows=[r for r in chunk.rows if r["placement_id"] not in refused],
            slots=[s for s in chunk.slots if s[2] not in refused],
            outbox=[
                o for o, (_p, _w, pid) in zip(chunk.outbox, chunk.batch, strict=True) if pid not in refused
            ],
        )
    except BaseException:
        await ctx.quotas.release_many([(w.tenant, pid) for w, pid in kept])
        raise
    gone = [(w.tenant, pid) for w, pid in kept if w.id not in placed]
    if gone:  # cancelled since the pass read the queue
        await ctx.quotas.release_many(gone)
    return len(placed)
