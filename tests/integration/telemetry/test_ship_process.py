"""Real supervisors and a file:// object store: a job's output and outputs leave the host, and its exit is
reported only once they have."""

from __future__ import annotations

import asyncio
import json
import os
import time
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

from libs.common.events.scheduler import AllocationItem, RunSpec
from libs.common.objectstore import ObjectNotFound, ObjectStore, keys, open_store
from services.telemetry.adapters.runner import files
from services.telemetry.adapters.runner.process import ProcessRunner
from services.telemetry.adapters.runner.report import RunnerReport
from services.telemetry.adapters.runner.ship import Shipper

GPU = "GPU-11111111-1111-1111-1111-111111111111"
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _start(runner: ProcessRunner, workload: str, script: str) -> Path:
    runner.start(
        workload_id=workload,
        tenant_id="acme",
        placement_id=f"pl-{workload}",
        gpu_uuids=[GPU],
        allocations=[AllocationItem(gpu_uuid=GPU, units=Decimal(8), model="H100")],
        profile="training",
        duration_s=None,
        run=RunSpec(command=["sh", "-c", script]),
        at=NOW,
    )
    return runner.root / files.run_dir_name(workload_id=workload, placement_id=f"pl-{workload}")


def _exits(reports: list[RunnerReport]) -> list[RunnerReport]:
    return [r for r in reports if r.event != "started"]


async def _log(store: ObjectStore, workload: str) -> bytes:
    infos = await store.list(keys.log_prefix(workload, f"pl-{workload}"))
    chunks = [(k.seq, i.key) for i in infos if (k := keys.parse_log_chunk(i.key)) is not None]
    assert [seq for seq, _ in chunks] == list(range(len(chunks)))
    return b"".join([await store.get(key) for _, key in chunks])


async def _manifest(store: ObjectStore, workload: str) -> dict[str, object] | None:
    try:
        return json.loads(await store.get(keys.output_manifest(workload, f"pl-{workload}")))  # type: ignore[no-any-return]
    except ObjectNotFound:
        return None


async def test_a_jobs_output_and_files_are_in_the_store_before_its_exit_is_reported(
    root: Path, tmp_path: Path
) -> None:
    store = open_store((tmp_path / "objects").as_uri())
    shipper = Shipper(store=store, root=root, chunk_bytes=1024, output_cap_bytes=1000)
    runner = ProcessRunner(
        root=root, card_memory={}, log_quota_bytes=1 << 20, environ=dict(os.environ), shipper=shipper
    )
    out = '"$GPUCLOUD_OUTPUT_DIR"'
    script = (
        'i=0; while [ $i -lt 300 ]; do echo "line $i"; i=$((i+1)); done; echo to-err >&2; '
        f"printf abc > {out}/a.txt; mkdir {out}/sub; head -c 300 /dev/zero > {out}/sub/b.bin; "
        f"head -c 5000 /dev/zero > {out}/big.bin"
    )
    run = _start(runner, "wl-out", script)
    seen: list[RunnerReport] = []
    deadline = time.monotonic() + 10
    while not (run / files.EXIT).exists():  # polled but not shipped: its exit is held back
        assert time.monotonic() < deadline, "the job did not end"
        seen += runner.poll(now=NOW)
        await asyncio.sleep(0.05)
    seen += runner.poll(now=NOW)
    assert _exits(seen) == []
    while not _exits(seen):
        assert time.monotonic() < deadline, f"no exit reported; reports: {seen}"
        await shipper.ship()
        seen += runner.poll(now=NOW)
        if _exits(seen):
            assert await _manifest(store, "wl-out") is not None  # in the store when the exit is told
    assert _exits(seen)[0].exit_code == 0
    written = (run / files.LOG).read_bytes()
    assert written.splitlines() == [*(f"line {i}".encode() for i in range(300)), b"to-err"]
    assert await _log(store, "wl-out") == written
    manifest = await _manifest(store, "wl-out")
    assert manifest is not None
    assert manifest["files"] == [{"path": "a.txt", "size": 3}, {"path": "sub/b.bin", "size": 300}]
    assert manifest["dropped"] == [
        {"path": "big.bin", "size": 5000, "why": "over the outputs cap of 1000 bytes"}
    ]
    assert await store.get(keys.output_file("wl-out", "pl-wl-out", "a.txt")) == b"abc"
    end = json.loads(await store.get(keys.log_end("wl-out", "pl-wl-out")))
    assert (end["bytes"], end["dropped_bytes"]) == (len(written), 0)


async def test_output_rotated_by_the_supervisor_under_its_quota_reaches_the_store_whole(
    root: Path, tmp_path: Path
) -> None:
    store = open_store((tmp_path / "objects").as_uri())
    shipper = Shipper(store=store, root=root)
    runner = ProcessRunner(
        root=root, card_memory={}, log_quota_bytes=2048, environ=dict(os.environ), shipper=shipper
    )
    line = "x" * 95  # 100 bytes a line with the number: a rotation every ~10 lines, 1 s of slack
    script = f'i=100; while [ $i -lt 140 ]; do echo "$i {line}"; i=$((i+1)); sleep 0.05; done'
    run = _start(runner, "wl-rot", script)
    seen: list[RunnerReport] = []
    deadline = time.monotonic() + 15
    while not _exits(seen):
        assert time.monotonic() < deadline, f"no exit reported; reports: {seen}"
        await shipper.ship()
        seen += runner.poll(now=NOW)
        await asyncio.sleep(0.02)
    expected = b"".join(f"{i} {line}\n".encode() for i in range(100, 140))
    assert (files.read_json(run / "log.json") or {}).get("rotations", 0) >= 3
    assert await _log(store, "wl-rot") == expected
