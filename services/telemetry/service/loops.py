"""The aggregator's other background loops: closing rollup windows and refreshing allocation labels."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable

from libs.common.events.telemetry import GpuRollup, NodeRollupV1
from libs.common.runtime import BackgroundTask, ServiceRuntime
from libs.common.stopping import sleep_or_stop
from services.telemetry.adapters.allocation_store import AllocationStore
from services.telemetry.domain.allocations import AllocationView
from services.telemetry.domain.rollup import GpuWindow
from services.telemetry.service.observability import OPEN_WINDOWS, ROLLUPS_WRITTEN
from services.telemetry.service.state import TelemetryState
from services.telemetry.service.unit_of_work import TelemetryUnitOfWork, telemetry_uow

__all__ = ["allocation_loop", "rollup_loop", "write_rollups"]

# The sample path shares this event loop: a minute's 10,000 windows are closed and written in slices
# small enough (a few ms of CPU each) that a poll of samples never waits long behind them.
YIELD_EVERY = 100  # windows per slice of p95 work
UPSERT_CHUNK = 1000  # windows per upsert statement (encoding all 10,000 at once held the loop ~0.1 s)


async def _every(stop: asyncio.Event, period_s: float, work: Callable[[], Awaitable[None]]) -> None:
    while not stop.is_set():
        await work()
        await sleep_or_stop(stop, period_s)


def allocation_loop(state: TelemetryState) -> BackgroundTask:
    """Reload who holds which GPU from Postgres (the consumer of scheduler events keeps it current)."""

    async def loop(runtime: ServiceRuntime, stop: asyncio.Event) -> None:
        async def refresh() -> None:
            state.view = AllocationView.of(await AllocationStore(runtime.pool).allocations())

        await _every(stop, state.settings.allocation_refresh_s, refresh)

    return loop


def rollup_loop(state: TelemetryState) -> BackgroundTask:
    """Close finished windows: upsert them and publish one NodeRollupV1 per node, in one transaction."""

    async def loop(runtime: ServiceRuntime, stop: asyncio.Event) -> None:
        s = state.settings

        async def flush() -> None:
            windows: list[GpuWindow] = []
            for n, window in enumerate(state.rollups.close(now=time.time(), grace_s=s.rollup_grace_s)):
                windows.append(window)
                if n % YIELD_EVERY == YIELD_EVERY - 1:
                    await asyncio.sleep(0)
            OPEN_WINDOWS.set(state.rollups.open_windows)
            if windows:
                await write_rollups(uow=telemetry_uow(runtime), windows=windows)

        await _every(stop, min(1.0, s.rollup_interval_s / 4), flush)

    return loop


async def write_rollups(*, uow: TelemetryUnitOfWork, windows: list[GpuWindow]) -> None:
    """Upsert windows and emit their node rollups atomically: one commit of ``uow``, opened here.

    A replayed window overwrites itself.
    """
    by_node: dict[tuple[str, object], list[GpuWindow]] = defaultdict(list)
    for w in windows:
        by_node[(w.node, w.window_start)].append(w)
    async with uow:
        store = uow.rollups
        for start in range(0, len(windows), UPSERT_CHUNK):
            await store.upsert_rollups(windows[start : start + UPSERT_CHUNK])
        await uow.emit_many([_node_rollup(node, group) for (node, _), group in by_node.items()])
        await uow.commit()
    ROLLUPS_WRITTEN.inc(len(windows))


def _node_rollup(node: str, windows: list[GpuWindow]) -> NodeRollupV1:
    def stat(w: GpuWindow, metric: str, what: str) -> float | None:
        return w.stats.get(metric, {}).get(what)

    return NodeRollupV1(
        node=node,
        minute=windows[0].window_start,
        gpus=[
            GpuRollup(
                gpu=w.gpu,
                sm_util_avg=stat(w, "sm_util_pct", "avg"),
                sm_util_max=stat(w, "sm_util_pct", "max"),
                fb_used_pct_max=stat(w, "fb_used_pct", "max"),
                power_w_avg=stat(w, "power_w", "avg"),
                samples=w.samples,
                workload_id=w.workload_id,
                tenant_id=w.tenant_id,
            )
            for w in windows
        ],
    )
