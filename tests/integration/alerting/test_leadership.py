"""One evaluator at a time, also when the active one's lock session is cut from under it."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest
from aiokafka import TopicPartition
from fastapi import FastAPI

from libs.common.bus.kafka import group_lag
from libs.common.db.locks import advisory_lock_holder
from libs.common.events import Envelope, envelop, topics
from libs.common.events.telemetry import SampleBatchV1
from services.alerting.app import create_app
from services.alerting.service.evaluator import Evaluator
from tests.integration.alerting.helpers import alerting_settings, gpu
from tests.integration.bus_fixtures import publish
from tests.integration.support import ADMIN_HEADERS, Isolation, eventually, running


async def test_an_evaluator_whose_lock_session_dies_steps_down_and_one_evaluator_leads_again(
    isolation: Isolation,
) -> None:
    settings = alerting_settings(isolation)
    key = f"gpucloud.alerting.evaluator.{settings.pg_schema}"
    apps = [create_app(settings), create_app(settings)]
    async with running(apps[0]), running(apps[1]):
        pool = apps[0].state.runtime.pool

        async def one_leads_holding_the_lock() -> int | None:
            holder = await advisory_lock_holder(pool, key)
            return holder if holder is not None and _leading(apps) == 1 else None

        first = await eventually(one_leads_holding_the_lock, timeout=20, what="one evaluator leading")
        await asyncio.sleep(1.0)  # the standby retries every second: still one
        assert _leading(apps) == 1
        assert await advisory_lock_holder(pool, key) == first

        # The leader's session ends (a terminated backend, a restarted Postgres, a cut network): its lock
        # is gone, and the standby takes it within a second. The old leader must notice and stop.
        assert await pool.fetchval("SELECT pg_terminate_backend($1)", first)
        second = await eventually(
            lambda: _new_holder(pool, key, first), timeout=20, what="the lock taken by a new session"
        )
        await eventually(lambda: _async(_leading(apps) == 1), timeout=10, what="a single evaluator again")
        for _ in range(10):  # and it stays that way
            await asyncio.sleep(0.2)
            assert _leading(apps) == 1
        assert await advisory_lock_holder(pool, key) == second


def _leading(apps: list[FastAPI]) -> int:
    return sum(bool(app.state.evaluator.leading) for app in apps)


async def _new_holder(pool: asyncpg.Pool[Any], key: str, old: int) -> int | None:
    holder = await advisory_lock_holder(pool, key)
    return holder if holder not in (None, old) else None


async def _async(value: bool) -> bool:
    return value


async def test_an_evaluator_that_steps_down_leaves_what_it_had_not_committed_to_be_evaluated_again(
    isolation: Isolation,
) -> None:
    # Offsets are committed after the first fetch, then not for an hour: what comes after stays uncommitted.
    settings = alerting_settings(isolation, offset_commit_interval_s=3600)
    key = f"gpucloud.alerting.evaluator.{settings.pg_schema}"
    topic = f"{isolation.topic_prefix}{topics.TELEMETRY_SAMPLES}"
    partitions = [TopicPartition(topic, p) for p in range(3)]
    group = settings.group_id("samples")
    app = create_app(settings)
    async with running(app):
        evaluator, pool = app.state.evaluator, app.state.runtime.pool
        await eventually(lambda: _async(evaluator.leading), timeout=20, what="the evaluator leading")
        await publish(isolation, _batches("first", 4), topic=topics.TELEMETRY_SAMPLES)
        await eventually(lambda: _async(evaluator.evaluated >= 8), timeout=20, what="the first batches read")
        await publish(isolation, _batches("second", 4), topic=topics.TELEMETRY_SAMPLES)
        await eventually(
            lambda: _async(evaluator.evaluated >= 16), timeout=20, what="the second batches read"
        )
        uncommitted = await group_lag(bootstrap=isolation.infra.kafka, group=group, partitions=partitions)
        assert uncommitted >= 4  # at least the second batches: read and evaluated, not committed
        before = evaluator.evaluated

        holder = await advisory_lock_holder(pool, key)
        assert holder is not None
        assert await pool.fetchval("SELECT pg_terminate_backend($1)", holder)
        await eventually(lambda: _new_holder(pool, key, holder), timeout=20, what="the lock taken again")
        # Stepping down committed nothing more, so the next evaluator read those batches again.
        await eventually(
            lambda: _async(evaluator.evaluated >= before + 2 * uncommitted),
            timeout=20,
            what="the uncommitted batches evaluated again",
        )


def _batches(node: str, count: int, *, mem_pct: float = 40) -> list[Envelope]:
    """`count` batches of two GPUs' samples (quiet by default), a second apart."""
    start = datetime.now(UTC) - timedelta(seconds=count)
    return [
        envelop(
            SampleBatchV1(node=node, at=at, samples=[gpu(i, node=node, mem_pct=mem_pct) for i in range(2)]),
            source="test",
        )
        for at in (start + timedelta(seconds=n) for n in range(count))
    ]


async def test_a_deposed_evaluator_that_has_not_noticed_yet_writes_nothing(
    isolation: Isolation, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only the fence in the write can stop it: the per-tick check of the lock's session is switched off.
    async def unchecked(self: Evaluator) -> None:
        return None

    monkeypatch.setattr(Evaluator, "_confirm_lock", unchecked)
    settings = alerting_settings(isolation)
    key = f"gpucloud.alerting.evaluator.{settings.pg_schema}"
    apps = [create_app(settings), create_app(settings)]
    async with running(apps[0]) as client, running(apps[1]):
        pool = apps[0].state.runtime.pool
        response = await client.post("/v1/rules", json=_MEMORY_RULE, headers=ADMIN_HEADERS)
        assert response.status_code == 201, response.text
        first = await eventually(lambda: advisory_lock_holder(pool, key), timeout=20, what="a leader")
        assert await pool.fetchval("SELECT pg_terminate_backend($1)", first)
        await eventually(lambda: _new_holder(pool, key, first), timeout=20, what="the lock taken again")
        assert _leading(apps) == 2  # the deposed one has not noticed: nothing told it yet

        # Samples that change alert state on every partition: the deposed evaluator, consuming some of
        # them until the group rebalances, must fail to write and step down.
        crossing = [b for n in range(6) for b in _batches(f"hot-{n}", 2, mem_pct=95)]
        await publish(isolation, crossing, topic=topics.TELEMETRY_SAMPLES)
        await eventually(
            lambda: _async(_leading(apps) == 1), timeout=30, what="the deposed evaluator stepping down"
        )
        assert await advisory_lock_holder(pool, key) not in (None, first)


_MEMORY_RULE = {
    "name": "FenceMemHigh",
    "metric": "fb_used_pct",
    "threshold": 90,
    "for": "30s",
    "matchers": [{"name": "node", "op": "=~", "value": "hot-.*"}],
    "severity": "critical",
}
