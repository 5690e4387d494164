"""On a backlog the placer coalesces a burst of wake-ups and lets queue positions lag a bounded while."""

from __future__ import annotations

import asyncio
import contextlib
import time
from types import SimpleNamespace
from typing import cast

from services.scheduler.service.context import SchedulerContext
from services.scheduler.service.pacing import coalesce, defer_waiting
from services.scheduler.service.pass_inputs import PassCache


def _ctx(*, woken: bool) -> SchedulerContext:
    wake = asyncio.Event()
    if woken:
        wake.set()
    return cast(SchedulerContext, SimpleNamespace(wake=wake))


async def _keep_waking(wake: asyncio.Event, every_s: float) -> None:
    while True:
        wake.set()
        await asyncio.sleep(every_s)


async def test_a_burst_of_wake_ups_is_waited_out_for_at_most_the_last_pass_s_length() -> None:
    stop, wake = asyncio.Event(), asyncio.Event()
    waking = asyncio.create_task(_keep_waking(wake, 0.005))
    started = time.monotonic()
    try:
        await coalesce(stop, wake, last_pass_s=0.08)
    finally:
        waking.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waking
    waited = time.monotonic() - started
    assert 0.07 <= waited < 0.5, "wake-ups kept coming: it waits the whole bound, and no longer"


async def test_a_lone_wake_up_waits_only_half_the_last_pass_for_another() -> None:
    stop, wake = asyncio.Event(), asyncio.Event()
    started = time.monotonic()
    await coalesce(stop, wake, last_pass_s=0.2)
    assert time.monotonic() - started < 0.2


def test_positions_wait_for_the_next_pass_while_a_backlog_is_placed_then_are_written_within_the_bound() -> (
    None
):
    cache = PassCache()
    ctx = _ctx(woken=True)
    assert defer_waiting(ctx, cache, placed=500), "placed work and woken meanwhile: the next pass writes"
    assert defer_waiting(ctx, cache, placed=500)
    assert cache.waiting_stale_since is not None
    cache.waiting_stale_since -= 1.0  # the positions have lagged longer than the bound
    assert not defer_waiting(ctx, cache, placed=500), "written once they lag too long"
    assert cache.waiting_stale_since is None


def test_positions_are_written_by_a_pass_that_placed_nothing_or_was_not_woken() -> None:
    cache = PassCache()
    assert not defer_waiting(_ctx(woken=True), cache, placed=0)
    assert not defer_waiting(_ctx(woken=False), cache, placed=500)
    assert not defer_waiting(_ctx(woken=True), None, placed=500), "without the placer's cache: always"
