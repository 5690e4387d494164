"""The agent's quick poll: a placement launched and its start told within milliseconds, not at a tick.

The sample tick (1 s) used to be the only poll of the runner: a placement read from the topic was
launched at the next tick and its start seen at the one after, 1 to 2 s later. A runner that offers
the quick poll (the process runner) is now polled every PROMPT_EVERY_S while it has launches pending
or launched runs not yet seen started; what that poll reports is published at once, and the broker's
acknowledgement awaited, as a tick does (NodeAgent takes turns between the two, see its _report).
Idle, the loop only asks the runner whether it waits for something, an attribute read.

The replay rule holds: records are applied a fetched batch at a time, and a poll only comes between
batches, so the history's placed-then-ended pairs still launch nothing (the quick poll starts after the
history is read, as the ticks do).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Protocol, runtime_checkable

from services.telemetry.service.agent.runner import RunnerReport

__all__ = ["PROMPT_EVERY_S", "PromptRunner", "prompt_loop"]

#: How often the quick poll runs while a runner waits for a launch or a start (a 10 ms step in a
#: 100 ms placed-to-running budget; about 1% of a core when idle).
PROMPT_EVERY_S = 0.01


@runtime_checkable
class PromptRunner(Protocol):
    """A runner that can be polled cheaply for launches and starts between the agent's ticks."""

    def awaiting_start(self) -> bool:
        """Whether launches are pending or a launched workload is not yet seen started."""
        ...

    def poll_starts(self, *, now: datetime) -> list[RunnerReport]:
        """Launch what is pending; the reports of the workloads not yet seen started (only those)."""
        ...


async def prompt_loop(
    *,
    runner: object,
    report: Callable[[], Awaitable[None]],
    stop: asyncio.Event,
    errors: tuple[type[BaseException], ...],
    every_s: float = PROMPT_EVERY_S,
) -> None:
    """Until stop: while the runner waits for a launch or a start, report() every every_s. A report
    that fails with one of errors (the broker is away) is left to the next tick, which sends it again
    and says so. Returns at once for a runner without the quick poll (the simulator)."""
    if not isinstance(runner, PromptRunner):
        return
    while not stop.is_set():
        if runner.awaiting_start():
            with contextlib.suppress(*errors):
                await report()
        await asyncio.sleep(every_s)
