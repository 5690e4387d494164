"""Sleep-or-stop: a wait that a stop request cuts short, and that always lets the other tasks run."""

from __future__ import annotations

import asyncio

from libs.common.stopping import sleep_or_stop, wait_for_wake


async def test_a_stop_cuts_the_sleep_short_and_says_so() -> None:
    stop = asyncio.Event()
    asyncio.get_running_loop().call_later(0.01, stop.set)
    assert await asyncio.wait_for(sleep_or_stop(stop, 60), timeout=5) is True


async def test_a_sleep_that_runs_out_says_it_is_not_stopping() -> None:
    assert await sleep_or_stop(asyncio.Event(), 0.01) is False


async def test_a_sleep_of_no_time_still_lets_another_task_run_first() -> None:
    ran: list[str] = []

    async def other() -> None:
        ran.append("other")

    task = asyncio.create_task(other())
    await sleep_or_stop(asyncio.Event(), -1.0)
    assert ran == ["other"]
    await task


async def test_a_wake_ends_the_wait_and_leaves_both_events_as_they_are() -> None:
    stop, wake = asyncio.Event(), asyncio.Event()
    asyncio.get_running_loop().call_later(0.01, wake.set)
    await asyncio.wait_for(wait_for_wake(stop, wake, 60), timeout=5)
    assert wake.is_set()
    assert not stop.is_set()
