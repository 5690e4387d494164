"""Submit a task, get the result: waiting for workloads to end without holding a database connection.

One ``EndWatch`` per process asks, every ``poll_s`` while anyone waits, which of the awaited workloads
have ended, in one statement for all of them, and wakes their waiters; ``poke`` asks at once (call it
where this process learns of an end). A waiter holds nothing but an event.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from libs.common.objectstore import ObjectStore
from services.scheduler.domain.model import TERMINAL_STATES
from services.scheduler.domain.stored import StoredWorkload
from services.scheduler.service.results import latest_manifest, log_index, read_log

__all__ = ["LOG_TAIL_LINES", "EndWatch", "TaskResult", "task_result"]

log = logging.getLogger(__name__)

#: Lines of the log a task's result carries.
LOG_TAIL_LINES = 100
_TERMINAL = frozenset(s.value for s in TERMINAL_STATES)
Ended = Callable[[Sequence[str]], Awaitable[set[str]]]


class EndWatch:
    """Waiters on workloads' ends, woken by one shared poll (``ended``: which of these ids ended)."""

    def __init__(self, *, ended: Ended, poll_s: float = 0.25) -> None:
        self._ended = ended
        self._poll_s = poll_s
        self._waiters: dict[str, list[asyncio.Event]] = {}
        self._poke = asyncio.Event()
        self._loop: asyncio.Task[None] | None = None

    @property
    def waiting(self) -> int:
        """How many waits are in progress."""
        return sum(len(w) for w in self._waiters.values())

    def poke(self) -> None:
        """Ask now rather than at the next poll."""
        self._poke.set()

    async def wait(self, workload_id: str, *, timeout_s: float) -> bool:
        """Until the workload ended (True) or ``timeout_s`` passed (False)."""
        event = asyncio.Event()
        self._waiters.setdefault(workload_id, []).append(event)
        if self._loop is None or self._loop.done():
            self._loop = asyncio.create_task(self._run(), name="task-end-watch")
        try:
            async with asyncio.timeout(timeout_s):
                await event.wait()
            return True
        except TimeoutError:
            return False
        finally:
            waiters = self._waiters.get(workload_id, [])
            if event in waiters:
                waiters.remove(event)
            if not waiters:
                self._waiters.pop(workload_id, None)

    async def _run(self) -> None:
        while self._waiters:
            try:
                for workload_id in await self._ended(list(self._waiters)):
                    for event in self._waiters.get(workload_id, []):
                        event.set()
            except Exception:  # a database hiccup: the waiters still time out, and the next poll retries
                log.warning("checking awaited workloads' ends failed", exc_info=True)
            self._poke.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._poke.wait(), timeout=self._poll_s)


@dataclass(frozen=True, slots=True)
class TaskResult:
    """A task's answer: the workload's end and what it left, or only its state while it runs."""

    workload_id: str
    state: str
    ended: bool
    exit_reason: str | None = None
    exit_code: int | None = None
    signal: int | None = None
    reason: str | None = None
    log_tail: str | None = None
    outputs: list[dict[str, Any]] | None = None


async def task_result(store: ObjectStore, workload: StoredWorkload) -> TaskResult:
    """What a task answers for ``workload`` now: its result once ended, else its state alone."""
    if workload.state not in _TERMINAL:
        return TaskResult(workload_id=workload.workload_id, state=workload.state, ended=False)
    index = await log_index(store, workload.workload_id)
    tail = await read_log(store, index.chunks, tail=LOG_TAIL_LINES)
    manifest = await latest_manifest(store, workload.workload_id)
    files = (manifest.body.get("files") if manifest is not None else None) or []
    return TaskResult(
        workload_id=workload.workload_id,
        state=workload.state,
        ended=True,
        exit_reason=workload.exit_reason,
        exit_code=workload.exit_code,
        signal=workload.exit_signal,
        reason=workload.reason,
        log_tail=tail.data.decode("utf-8", errors="replace"),
        outputs=[f for f in files if isinstance(f, dict)],
    )
