"""One evaluator at a time, also when the active one's lock session is cut from under it."""

from __future__ import annotations

import asyncio

from fastapi import FastAPI

from services.alerting.app import create_app
from tests.integration.alerting.helpers import alerting_settings
from tests.integration.support import Isolation, advisory_lock_holder, eventually, running


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


async def _new_holder(pool: object, key: str, old: int) -> int | None:
    holder = await advisory_lock_holder(pool, key)  # type: ignore[arg-type]
    return holder if holder not in (None, old) else None


async def _async(value: bool) -> bool:
    return value
