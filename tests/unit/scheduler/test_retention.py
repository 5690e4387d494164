"""Retention of logs and outputs: by last_modified, logs object by object, outputs a placement at a time."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

from libs.common.objectstore import ObjectStore, open_store
from libs.common.objectstore.keys import output_manifest
from services.scheduler.service.retention import Swept, sweep
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
    ], "a manifest never outlives the files it lists"
    again = await sweep(store, now=NOW + WEEK, log_retention=WEEK, output_retention=WEEK)
    assert again == Swept(logs=2, outputs=2)
    assert await _keys(store, "") == []
