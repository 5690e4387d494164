"""Retention of workloads' logs and outputs in the object store, swept by the active placer's replica.

Log objects go one by one once older (``last_modified``) than the log retention: a long job's old chunks
go while it still writes new ones, and ``end.json`` (the newest of an ended placement) goes last.
Outputs go a placement at a time, once its newest object is older than the output retention, the
manifest first and the files after it, so a sweep cut short never leaves a manifest listing a file that
is gone (the readers take a placement without a manifest as having no outputs).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import groupby

from libs.common.objectstore import ObjectInfo, ObjectStore
from libs.common.runtime import BackgroundTask, ServiceRuntime
from libs.common.stopping import sleep_or_stop

__all__ = ["Swept", "retention_sweeper", "sweep"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Swept:
    """What one sweep deleted."""

    logs: int
    outputs: int


def _placement_of(info: ObjectInfo) -> str:
    return "/".join(info.key.split("/")[:3])


async def _sweep_logs(store: ObjectStore, *, before: datetime) -> int:
    old = [i.key for i in await store.list("logs/") if i.last_modified < before]
    for key in old:
        await store.delete(key)
    return len(old)


async def _sweep_outputs(store: ObjectStore, *, before: datetime) -> int:
    deleted = 0
    for _, group in groupby(await store.list("outputs/"), key=_placement_of):
        objects = list(group)
        if max(i.last_modified for i in objects) >= before:
            continue
        for info in sorted(objects, key=lambda i: not i.key.endswith("/manifest.json")):
            await store.delete(info.key)
        deleted += len(objects)
    return deleted


async def sweep(
    store: ObjectStore, *, now: datetime, log_retention: timedelta, output_retention: timedelta
) -> Swept:
    """Delete the logs and outputs older than their retention; returns how many objects went."""
    logs = await _sweep_logs(store, before=now - log_retention)
    outputs = await _sweep_outputs(store, before=now - output_retention)
    return Swept(logs=logs, outputs=outputs)


async def _sweep_once(
    store: ObjectStore, *, every_s: float, log_retention_s: float, output_retention_s: float
) -> None:
    try:
        swept = await sweep(
            store,
            now=datetime.now(UTC),
            log_retention=timedelta(seconds=log_retention_s),
            output_retention=timedelta(seconds=output_retention_s),
        )
    except Exception:  # the sweeper must outlive any one failed sweep (a store down, a bad object)
        log.warning("retention sweep of %s failed; retrying in %.0f s", store.url, every_s, exc_info=True)
        return
    if swept.logs or swept.outputs:
        log.info("retention: %d log and %d output objects deleted", swept.logs, swept.outputs)


def retention_sweeper(
    store: ObjectStore,
    *,
    leading: Callable[[], bool],
    every_s: float,
    log_retention_s: float,
    output_retention_s: float,
) -> BackgroundTask:
    """A background task sweeping at start and then every ``every_s``, while ``leading()`` (one replica
    sweeps at a time; two at once would only delete the same objects twice)."""

    async def run(runtime: ServiceRuntime, stop: asyncio.Event) -> None:
        while True:
            if leading():
                await _sweep_once(
                    store,
                    every_s=every_s,
                    log_retention_s=log_retention_s,
                    output_retention_s=output_retention_s,
                )
            if await sleep_or_stop(stop, every_s):
                return

    return run
