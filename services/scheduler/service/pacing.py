"""How the placer paces its passes over a backlog: wake-ups coalesced, queue positions written late.

A pass over a queue of thousands costs its reads and its decisions whatever it places. When capacity
appears in a burst (GPUs registered by the thousand, a pool reopened, many jobs ending), the placer waits
out the burst briefly (``coalesce``) so one pass decides over all of it, and lets the stored queue
positions lag a bounded while (``defer_waiting``) instead of rewriting every waiting row each pass.
"""

from __future__ import annotations

import asyncio
import logging
import time

from services.scheduler.service.context import SchedulerContext
from services.scheduler.service.pass_inputs import PassCache

__all__ = ["COALESCE_FROM_S", "COALESCE_FROM_WAITING", "PassClock", "coalesce", "defer_waiting"]

log = logging.getLogger(__name__)

#: The longest the stored queue positions lag behind the passes while a backlog is being placed.
_STALE_WAITING_S = 0.5
#: After a pass this long that left at least ``COALESCE_FROM_WAITING`` waiting (a backlog), wake-ups that
#: keep coming are coalesced into one pass: each arriving within half the last pass's length (at most
#: ``_QUIET_MAX_S``) of the one before, for at most the last pass's length (at most ``_COALESCE_MAX_S``).
COALESCE_FROM_S = 0.02
COALESCE_FROM_WAITING = 1000
_QUIET_MAX_S = 0.1
_COALESCE_MAX_S = 0.25
#: A pass at least this long logs its phases (INFO).
_SLOW_PASS_S = 0.1


def defer_waiting(ctx: SchedulerContext, cache: PassCache | None, *, placed: int) -> bool:
    """Whether this pass leaves the queue's positions to the next one: it placed work and was woken
    meanwhile (capacity still arriving: a backlog being placed), and the stored positions are not yet
    ``_STALE_WAITING_S`` old. Each pass compares what it decides with what is stored, so the next one
    writes whatever changed; while a backlog drains, every placement moves every position behind it, and
    writing thousands of them per pass would cost more than the placements."""
    if cache is None:
        return False
    clock = time.monotonic()
    if not placed or not ctx.wake.is_set():
        cache.waiting_stale_since = None
        return False
    if cache.waiting_stale_since is None:
        cache.waiting_stale_since = clock
    if clock - cache.waiting_stale_since < _STALE_WAITING_S:
        return True
    cache.waiting_stale_since = None
    return False


class PassClock:
    """The phases of one pass, logged when the pass was slow (what a backlog's passes spend)."""

    def __init__(self) -> None:
        self._marks = [("start", time.perf_counter())]

    def mark(self, phase: str) -> None:
        self._marks.append((phase, time.perf_counter()))

    def report(self, **counts: int) -> None:
        total = self._marks[-1][1] - self._marks[0][1]
        if total < _SLOW_PASS_S:
            return
        steps = zip(self._marks, self._marks[1:], strict=False)
        phases = ", ".join(f"{b[0]} {b[1] - a[1]:.3f}s" for a, b in steps)
        log.info("slow pass (%.3fs): %s; %s", total, phases, ", ".join(f"{k} {v}" for k, v in counts.items()))


async def coalesce(stop: asyncio.Event, wake: asyncio.Event, *, last_pass_s: float) -> None:
    """Wait while wake-ups keep coming (a burst: GPUs registered by the thousand, a pool reopened, many
    jobs ending), each within half a pass of the last, for at most one pass's length (both bounded): one
    pass then decides over all of it, rather than one costly pass per consumer batch, each re-reading
    the queue and starving the consumer still recording the rest. A wake-up thus waits at most as long
    again as the pass it waits for costs. The placer calls it only after a costly pass over a backlog
    (``COALESCE_FROM_S``, ``COALESCE_FROM_WAITING``): a stream into a short queue is decided at once."""
    loop = asyncio.get_running_loop()
    quiet = min(last_pass_s / 2, _QUIET_MAX_S)
    deadline = loop.time() + min(last_pass_s, _COALESCE_MAX_S)
    while not stop.is_set() and (left := deadline - loop.time()) > 0:
        wake.clear()
        try:
            await asyncio.wait_for(wake.wait(), timeout=min(quiet, left))
        except TimeoutError:
            break
