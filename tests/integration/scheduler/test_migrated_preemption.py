"""A workload migrated earlier and then preempted: the urgent work gets its GPU, the victim waits (no loop).

Passes are run by hand (no placer), each at a chosen instant, over the real Postgres store and Redis.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from libs.common.events import topics
from libs.common.events.recovery import MigrationRequestedV1
from services.scheduler.app import create_app
from services.scheduler.service.context import SchedulerContext
from services.scheduler.service.pass_inputs import PassCache
from services.scheduler.service.placer import rebuild_quotas, run_pass
from tests.integration.scheduler.helpers import (
    capacity_known,
    create_tenant,
    publish_events,
    register_gpus,
    settings,
    spec,
)
from tests.integration.support import Isolation, eventually, running

GRACE_S = 1.0


@asynccontextmanager
async def _by_hand(isolation: Isolation) -> AsyncIterator[tuple[SchedulerContext, httpx.AsyncClient]]:
    app = create_app(settings(isolation, preemption_grace_s=GRACE_S))
    app.state.runtime.background = []  # no placer: the test runs each pass
    async with running(app) as client:
        yield app.state.scheduler, client


async def _submit(client: httpx.AsyncClient, headers: dict[str, str], **extra: Any) -> str:
    made = await client.post("/v1/workloads", json=spec(**extra), headers=headers)
    assert made.status_code == 201, made.text
    return str(made.json()["workload_id"])


async def _row(ctx: SchedulerContext, wid: str) -> Any:
    return await ctx.runtime.pool.fetchrow(
        "SELECT w.state, w.wait_reason, w.pinned_priority, w.avoid_gpus, p.grants, p.preempt_deadline"
        " FROM workloads w LEFT JOIN placements p ON p.placement_id = w.placement_id"
        " WHERE w.workload_id = $1",
        wid,
    )


async def _gpu_of(ctx: SchedulerContext, wid: str) -> str:
    row = await _row(ctx, wid)
    assert row["state"] == "placed", dict(row)
    [grant] = row["grants"]
    return str(grant["gpu"])


async def test_a_preempted_workload_migrated_before_waits_while_the_urgent_work_takes_its_gpu(
    isolation: Isolation,
) -> None:
    async with _by_hand(isolation) as (ctx, client):
        lab, prod = await create_tenant(client, "lab"), await create_tenant(client, "prod")
        g1, g2 = await register_gpus(isolation, count=2)
        await capacity_known(client, lab, 2)
        await rebuild_quotas(ctx)
        cache, now = PassCache(), datetime.now(UTC)

        async def pass_at(at: datetime) -> int:
            return await run_pass(ctx, now=at, cache=cache)

        # A (spot) is placed, then recovery moves it off its GPU: it lands on the other one.
        a = await _submit(client, lab, urgency=0.0, preemptible=True)
        assert await pass_at(now) == 1
        first = await _gpu_of(ctx, a)
        move = MigrationRequestedV1(incident_id="inc-1", workload_id=a, tenant_id="lab", away_from_gpu=first)
        await publish_events(isolation, [move], topic=topics.RECOVERY)

        async def migrating() -> bool:
            return bool((await _row(ctx, a))["state"] == "migrating")

        await eventually(migrating, timeout=20, what="A migrating")
        assert await pass_at(now) == 1
        freed_for_urgent = await _gpu_of(ctx, a)
        assert {first, freed_for_urgent} == {g1, g2}

        # The GPU A left is taken by on-demand work, so urgent work of another tenant must preempt A.
        steady = await _submit(client, lab, urgency=0.0)
        assert await pass_at(now) == 1
        assert await _gpu_of(ctx, steady) == first
        urgent = await _submit(client, prod, urgency=1.0)
        assert await pass_at(now) == 0
        assert (await _row(ctx, a))["preempt_deadline"] is not None

        # After the grace: A is requeued and the urgent work (alone) gets the GPU A held; A waits.
        later = now + timedelta(seconds=GRACE_S + 1)
        assert await pass_at(later) == 1
        assert await _gpu_of(ctx, urgent) == freed_for_urgent
        victim = await _row(ctx, a)
        assert victim["state"] == "queued", dict(victim)
        assert victim["wait_reason"] == "capacity"

        # And it stays so: no more preemptions, the urgent work keeps its GPU.
        for step in range(2, 5):
            await pass_at(later + timedelta(seconds=step * (GRACE_S + 1)))
            assert await _gpu_of(ctx, urgent) == freed_for_urgent
            assert (await _row(ctx, urgent))["preempt_deadline"] is None
            assert (await _row(ctx, a))["state"] == "queued"
