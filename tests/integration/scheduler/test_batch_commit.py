"""A pass's placements commit in chunks: all or nothing per chunk, then one at a time as before."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import asyncpg
import httpx
import pytest

from services.scheduler.adapters.workload_store import WorkloadStore
from services.scheduler.app import create_app
from services.scheduler.domain.cluster import WHOLE_SLOT, GpuView, Grant
from services.scheduler.domain.decisions import Placement
from services.scheduler.domain.model import Workload
from services.scheduler.domain.quota import QuotaUsage
from services.scheduler.service.commit import commit_placements
from services.scheduler.service.context import SchedulerContext
from services.scheduler.service.pass_inputs import PassCache, load_pass
from services.scheduler.service.placer import rebuild_quotas
from tests.integration.scheduler.helpers import capacity_known, create_tenant, register_gpus, settings, spec
from tests.integration.support import Isolation, running


@dataclass
class _Pass:
    """Workloads submitted and read as a pass reads them, ready for decisions the test makes."""

    headers: dict[str, str]
    gpus: list[str]
    ids: list[str]
    now: datetime
    views: dict[str, GpuView]
    workloads: dict[str, Workload]


@asynccontextmanager
async def _deciding_by_hand(
    isolation: Isolation, *, gpus: int, workloads: int
) -> AsyncIterator[tuple[SchedulerContext, httpx.AsyncClient, _Pass]]:
    """A scheduler without its placer, with workloads submitted and read as a pass reads them."""
    app = create_app(settings(isolation))
    app.state.runtime.background = []  # no placer: the test makes the decisions
    ctx: SchedulerContext = app.state.scheduler
    async with running(app) as client:
        yield ctx, client, await _submitted(isolation, client, ctx, gpus=gpus, workloads=workloads)


async def _submitted(
    isolation: Isolation, client: httpx.AsyncClient, ctx: SchedulerContext, *, gpus: int, workloads: int
) -> _Pass:
    headers = await create_tenant(client, "acme")
    uuids = await register_gpus(isolation, count=gpus)
    await capacity_known(client, headers, gpus)
    ids = []
    for _ in range(workloads):
        created = await client.post("/v1/workloads", json=spec(count=1), headers=headers)
        assert created.status_code == 201, created.text
        ids.append(created.json()["workload_id"])
    await rebuild_quotas(ctx)
    now = datetime.now(UTC)
    inputs = await load_pass(ctx.runtime.pool, ctx, now=now, cache=PassCache())
    return _Pass(
        headers=headers,
        gpus=uuids,
        ids=ids,
        now=now,
        views={g.uuid: g for g in inputs.state.gpus},
        workloads={e.workload.id: e.workload for e in inputs.queue},
    )


def on(wid: str, gpu: str) -> Placement:
    return Placement(wid, "acme", (Grant(gpu, "node-1", WHOLE_SLOT, 8.0),), 0.5)


async def test_a_failed_batch_gives_its_quota_back_and_falls_back_to_one_at_a_time(
    isolation: Isolation,
) -> None:
    async with _deciding_by_hand(isolation, gpus=3, workloads=4) as (ctx, _client, ready):
        gpus, ids, now, views, workloads = ready.gpus, ready.ids, ready.now, ready.views, ready.workloads

        # Two clean decisions commit as one batch.
        placed = await commit_placements(
            ctx, [on(ids[0], gpus[0]), on(ids[1], gpus[1])], workloads, now=now, gpus=views
        )
        assert placed == 2
        assert await ctx.quotas.usage(tenant="acme") == QuotaUsage(gpus=2, units_milli=16000, workloads=2)

        # A batch whose second decision takes a held slot fails whole and gives its reservations back;
        # then, one at a time, the first commits and the conflict surfaces as it always did.
        with pytest.raises(asyncpg.UniqueViolationError):
            await commit_placements(
                ctx, [on(ids[2], gpus[2]), on(ids[3], gpus[0])], workloads, now=now, gpus=views
            )
        assert await ctx.quotas.usage(tenant="acme") == QuotaUsage(gpus=3, units_milli=24000, workloads=3), (
            "only the placement committed alone is counted"
        )
        states = {
            r["workload_id"]: r["state"]
            for r in await ctx.runtime.pool.fetch("SELECT workload_id, state FROM workloads")
        }
        assert states == {ids[0]: "placed", ids[1]: "placed", ids[2]: "placed", ids[3]: "queued"}
        held = await ctx.runtime.pool.fetchval("SELECT count(*) FROM held_slots")
        assert held == 3


async def test_a_workload_cancelled_after_the_pass_read_it_is_not_placed_and_its_quota_is_given_back(
    isolation: Isolation,
) -> None:
    async with _deciding_by_hand(isolation, gpus=2, workloads=2) as (ctx, client, ready):
        ids = ready.ids
        cancelled = await client.post(f"/v1/workloads/{ids[1]}/cancel", headers=ready.headers)
        assert cancelled.status_code == 200, cancelled.text

        decisions = [on(wid, gpu) for wid, gpu in zip(ids, ready.gpus, strict=True)]
        placed = await commit_placements(ctx, decisions, ready.workloads, now=ready.now, gpus=ready.views)
        assert placed == 1
        assert await ctx.quotas.usage(tenant="acme") == QuotaUsage(gpus=1, units_milli=8000, workloads=1), (
            "the cancelled workload's reservation was given back"
        )
        rows = await ctx.runtime.pool.fetch("SELECT workload_id FROM placements")
        assert [r["workload_id"] for r in rows] == [ids[0]]
        assert (
            await ctx.runtime.pool.fetchval("SELECT state FROM workloads WHERE workload_id = $1", ids[1])
            == "cancelled"
        )
        placed_events = await ctx.runtime.pool.fetchval(
            "SELECT count(*) FROM outbox"
            " WHERE key = ANY($1::text[]) AND convert_from(payload, 'UTF8') LIKE $2",
            ids,
            "%scheduler.workload.placed.v1%",
        )
        assert placed_events == 1, "only the placed workload has a placed event"


async def _states(ctx: SchedulerContext) -> dict[str, str]:
    rows = await ctx.runtime.pool.fetch("SELECT workload_id, state FROM workloads")
    return {r["workload_id"]: r["state"] for r in rows}


async def _placed_events(ctx: SchedulerContext, ids: list[str]) -> dict[str, int]:
    rows = await ctx.runtime.pool.fetch(
        "SELECT key, count(*) AS n FROM outbox"
        " WHERE key = ANY($1::text[]) AND convert_from(payload, 'UTF8') LIKE $2 GROUP BY key",
        ids,
        "%scheduler.workload.placed.v1%",
    )
    return {r["key"]: r["n"] for r in rows}


async def test_a_chunk_refused_mid_way_leaves_earlier_chunks_placed_and_later_ones_queued_never_twice(
    isolation: Isolation,
) -> None:
    async with _deciding_by_hand(isolation, gpus=5, workloads=6) as (ctx, _client, ready):
        gpus, ids = ready.gpus, ready.ids
        decisions = [
            on(ids[0], gpus[0]),
            on(ids[1], gpus[1]),  # chunk 1: commits
            on(ids[2], gpus[2]),
            on(ids[3], gpus[0]),  # chunk 2: takes chunk 1's slot, so it is refused and goes one at a time
            on(ids[4], gpus[3]),
            on(ids[5], gpus[4]),  # chunk 3: never written, the conflict above ends the commit
        ]
        with pytest.raises(asyncpg.UniqueViolationError):
            await commit_placements(ctx, decisions, ready.workloads, now=ready.now, gpus=ready.views, chunk=2)

        placed = {ids[0], ids[1], ids[2]}
        assert await _states(ctx) == {w: "placed" if w in placed else "queued" for w in ids}
        assert await _placed_events(ctx, ids) == dict.fromkeys(placed, 1), "one placed event each, none twice"
        assert await ctx.runtime.pool.fetchval("SELECT count(*) FROM placements") == 3
        assert await ctx.quotas.usage(tenant="acme") == QuotaUsage(gpus=3, units_milli=24000, workloads=3), (
            "only what committed holds quota: the refused chunk's reservations were given back"
        )

        # The next pass decides the rest again, and places each once.
        rest = [on(ids[3], gpus[3]), on(ids[4], gpus[4])]
        assert (
            await commit_placements(ctx, rest, ready.workloads, now=ready.now, gpus=ready.views, chunk=2) == 2
        )
        assert await _placed_events(ctx, ids) == dict.fromkeys([*placed, ids[3], ids[4]], 1)


async def test_a_commit_that_crashes_mid_way_keeps_the_chunks_before_and_holds_no_quota_for_the_rest(
    isolation: Isolation, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with _deciding_by_hand(isolation, gpus=6, workloads=6) as (ctx, _client, ready):
        gpus, ids = ready.gpus, ready.ids
        real = WorkloadStore.place_many
        calls = 0

        async def lost_on_the_second(self: WorkloadStore, **kwargs: Any) -> set[str]:
            nonlocal calls
            calls += 1
            if calls == 2:
                raise ConnectionResetError("the database went away")
            return await real(self, **kwargs)

        monkeypatch.setattr(WorkloadStore, "place_many", lost_on_the_second)
        decisions = [on(w, g) for w, g in zip(ids, gpus, strict=True)]
        with pytest.raises(ConnectionResetError):
            await commit_placements(ctx, decisions, ready.workloads, now=ready.now, gpus=ready.views, chunk=2)

        assert await _states(ctx) == {w: "placed" if w in ids[:2] else "queued" for w in ids}
        assert await _placed_events(ctx, ids) == dict.fromkeys(ids[:2], 1)
        assert await ctx.quotas.usage(tenant="acme") == QuotaUsage(gpus=2, units_milli=16000, workloads=2), (
            "the lost chunk's reservations were given back, and the chunk after it reserved nothing"
        )


async def test_a_pass_rereads_only_placements_changed_since_and_sees_what_a_fresh_read_sees(
    isolation: Isolation,
) -> None:
    async with _deciding_by_hand(isolation, gpus=5, workloads=5) as (ctx, _client, ready):
        gpus, ids, now, views, workloads = ready.gpus, ready.ids, ready.now, ready.views, ready.workloads
        placed = await commit_placements(
            ctx, [on(ids[i], gpus[i]) for i in range(3)], workloads, now=now, gpus=views
        )
        assert placed == 3
        pool, cache = ctx.runtime.pool, PassCache()
        first = await load_pass(pool, ctx, now=now, cache=cache)
        assert {a.workload_id for a in first.state.allocations} == set(ids[:3])
        kept = {pid: entry[1] for pid, entry in cache.placements.items()}

        # Between two passes: one placement ends, one starts migrating, one is written again (a new row
        # version), and a fourth workload is placed.
        pid_of = {
            r["workload_id"]: r["placement_id"]
            for r in await pool.fetch("SELECT workload_id, placement_id FROM placements")
        }
        await pool.execute("UPDATE placements SET ended_at = now() WHERE placement_id = $1", pid_of[ids[0]])
        await pool.execute("UPDATE placements SET migrating = true WHERE placement_id = $1", pid_of[ids[1]])
        await pool.execute("UPDATE placements SET priority = 0.9 WHERE placement_id = $1", pid_of[ids[2]])
        assert await commit_placements(ctx, [on(ids[3], gpus[3])], workloads, now=now, gpus=views) == 1

        again = await load_pass(pool, ctx, now=now, cache=cache)
        fresh = await load_pass(pool, ctx, now=now, cache=PassCache())
        assert sorted(again.state.allocations, key=lambda a: a.workload_id) == sorted(
            fresh.state.allocations, key=lambda a: a.workload_id
        )
        by_workload = {a.workload_id: a for a in again.state.allocations}
        assert set(by_workload) == {ids[2], ids[3]}  # ended and migrating hold nothing
        assert by_workload[ids[2]].priority == 0.9
        assert pid_of[ids[0]] not in cache.placements
        assert cache.placements[pid_of[ids[1]]][1].migrating
        # Nothing changed since: the next pass reads no row again (the kept objects are the same).
        before = {pid: entry[1] for pid, entry in cache.placements.items()}
        await load_pass(pool, ctx, now=now, cache=cache)
        assert all(cache.placements[pid][1] is row for pid, row in before.items())
        assert kept[pid_of[ids[2]]] is not cache.placements[pid_of[ids[2]]][1]
