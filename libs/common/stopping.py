"""Waiting that a stop request cuts short: the one sleep every background loop uses."""

from __future__ import annotations

import asyncio
import contextlib

__all__ = ["sleep_or_stop", "wait_for_wake"]


async def sleep_or_stop(stop: asyncio.Event, seconds: float) -> bool:
    """Wait ``seconds`` or until ``stop`` is set, whichever comes first; True when stopping.

    It always yields to the event loop once, even for no time at all, so a loop that runs late cannot
    starve the others.
    """
    if seconds <= 0:
        await asyncio.sleep(0)
    else:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=seconds)
    return stop.is_set()


async def wait_for_wake(stop: asyncio.Event, wake: asyncio.Event, seconds: float) -> None:
    """Wait until ``wake`` or ``stop`` is set, or ``seconds`` pass; the caller clears ``wake``."""
    waiters = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(wake.wait())]
    try:
        await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
