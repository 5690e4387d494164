"""Retention of logs and outputs: by last_modified, logs object by object, outputs a placement at a time."""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from libs.common.db import service_migrations
from libs.common.objectstore import ObjectInfo, ObjectStore, open_store
from libs.common.objectstore.keys import output_file, output_manifest
from libs.common.runtime import ServiceRuntime
from services.scheduler.service.retention import Swept, retention_sweeper, sweep
from services.scheduler.settings import SchedulerSettings
from tests.unit.scheduler.results_harness import T0_MS, put_chunk, put_end, put_outputs

NOW = datetime(2026, 12, 2, tzinfo=UTC)
WEEK = timedelta(days=7)


def _age(root: Path, key: str, days: float) -> None:
    """Set an object's last_modified (a local store's file time) to ``days`` before NOW."""
    at = (NOW - timedelta(days=days)).timestamp()
    os.utime(root / key, (at, at))


async def _keys(store: ObjectStore, prefix: str) -> list[str]:
    return [i.key for i in await store.list(prefix)]


async def test_old_log_chunks_go_one_by_one_and_an_output_placement_goes_whole_once_its_newest_object_is_old(
    tmp_path: Path,
) -> None:
    store = open_store(tmp_path.as_uri())
    await put_chunk(store, "wl-1", "pl-a", 0, "old\n", at_ms=T0_MS)
    await put_chunk(store, "wl-1", "pl-a", 1, "new\n", at_ms=T0_MS + 1)
    await put_end(store, "wl-1", "pl-a")
    await put_outputs(store, "wl-1", "pl-a", {"a.txt": b"a", "deep/b.txt": b"b"})
    await put_outputs(store, "wl-2", "pl-b", {"c.txt": b"c"})
    for key in await _keys(store, ""):
        _age(tmp_path, key, 8)
    _age(tmp_path, "logs/wl-1/pl-a/0000000001-1764000000001.log", 1)
    _age(tmp_path, "logs/wl-1/pl-a/end.json", 1)
    _age(tmp_path, output_manifest("wl-2", "pl-b"), 6)  # its files are old, its manifest is not

    swept = await sweep(store, now=NOW, log_retention=WEEK, output_retention=WEEK)

    assert swept == Swept(logs=1, outputs=3)
    assert await _keys(store, "logs/") == [
        "logs/wl-1/pl-a/0000000001-1764000000001.log",
        "logs/wl-1/pl-a/end.json",
    ]
    assert await _keys(store, "outputs/") == [
        "outputs/wl-2/pl-b/files/c.txt",
        "outputs/wl-2/pl-b/manifest.json",
    ], "a placement goes whole once its newest object is old: pl-b's manifest is not"
    again = await sweep(store, now=NOW + WEEK, log_retention=WEEK, output_retention=WEEK)
    assert again == Swept(logs=2, outputs=2)
    assert await _keys(store, "") == []


async def test_a_sweep_cut_short_leaves_the_files_without_their_manifest_never_a_manifest_without_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(tmp_path.as_uri())
    await put_outputs(store, "wl-1", "pl-a", {"a.txt": b"a", "b.txt": b"b"})
    for key in await _keys(store, ""):
        _age(tmp_path, key, 8)
    delete = store.delete
    deleted: list[str] = []

    async def cut_after_one(key: str) -> None:
        if deleted:
            raise ConnectionError("the sweep is cut short")
        deleted.append(key)
        await delete(key)

    monkeypatch.setattr(store, "delete", cut_after_one)
    with pytest.raises(ConnectionError):
        await sweep(store, now=NOW, log_retention=WEEK, output_retention=WEEK)
    assert await _keys(store, "outputs/") == [output_file("wl-1", "pl-a", p) for p in ("a.txt", "b.txt")]


class _FlakyStore(ObjectStore):
    """A local store whose first listing fails with an error no store names."""

    failures = 1

    async def list(self, prefix: str) -> list[ObjectInfo]:
        if self.failures:
            self.failures -= 1
            raise RuntimeError("a bug in one sweep")
        return await super().list(prefix)


async def _sweeps_until_gone(root: Path, *, swept: ObjectStore | None = None, every_s: float) -> None:
    store = open_store(root.as_uri())
    await put_chunk(store, "wl-1", "pl-a", 0, "old\n", at_ms=T0_MS)
    _age(root, "logs/wl-1/pl-a/0000000000-1764000000000.log", 365 * 10)
    settings = SchedulerSettings()
    runtime = ServiceRuntime(settings=settings, migrations=service_migrations("scheduler"))
    run = retention_sweeper(
        swept or store, leading=lambda: True, every_s=every_s, log_retention_s=86400, output_retention_s=86400
    )
    stop = asyncio.Event()
    task = asyncio.ensure_future(run(runtime, stop))
    try:
        async with asyncio.timeout(5):
            while await _keys(store, "logs/"):
                assert not task.done(), "the sweeper died"
                await asyncio.sleep(0.01)
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=5)


async def test_the_sweeper_sweeps_once_at_start_not_only_after_its_period(tmp_path: Path) -> None:
    await _sweeps_until_gone(tmp_path, every_s=3600)


async def test_the_sweeper_outlives_a_sweep_that_raised_any_error(tmp_path: Path) -> None:
    local = open_store(tmp_path.as_uri())
    await _sweeps_until_gone(tmp_path, swept=_FlakyStore(local._store, url=local.url), every_s=0.01)
