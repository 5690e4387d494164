"""The shipper over run directories made by hand (the supervisor's own LogFile writes the log), with a
memory object store: chunks, rotation, crashes, outputs and their cap, and the exit held back for them."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import random
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from libs.common.objectstore import ObjectStore, ObjectStoreError, keys, open_store
from services.telemetry.adapters.agent.publisher_fake import FakePublisher
from services.telemetry.adapters.runner import files
from services.telemetry.adapters.runner.process import ProcessRunner
from services.telemetry.adapters.runner.ship import SHIPPED, Shipper, is_finalized
from services.telemetry.adapters.runner.supervise import LOG_STATE, LogFile
from services.telemetry.service.agent.process import NodeAgent
from services.telemetry.service.agent.setup import simulated_setup
from services.telemetry.settings import TelemetrySettings

WL, PL = "wl-1", "pl-1"
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _run_dir(root: Path, workload: str = WL, placement: str = PL) -> Path:
    path = root / files.run_dir_name(workload_id=workload, placement_id=placement)
    (path / files.OUTPUT_DIR).mkdir(parents=True)
    files.write_json(
        path / files.SPEC, {"workload_id": workload, "placement_id": placement, "tenant_id": "t"}
    )
    return path


def _exit(path: Path) -> None:
    files.write_json(path / files.EXIT, {"exit_code": 0, "signal": None, "reason": "succeeded", "at": "x"})


async def _chunks(store: ObjectStore, workload: str = WL, placement: str = PL) -> list[tuple[int, bytes]]:
    found = []
    for info in await store.list(keys.log_prefix(workload, placement)):
        if (key := keys.parse_log_chunk(info.key)) is not None:
            found.append((key.seq, await store.get(info.key)))
    return found


async def _log(store: ObjectStore) -> bytes:
    chunks = await _chunks(store)
    assert [seq for seq, _ in chunks] == list(range(len(chunks)))  # one object per seq, none skipped
    return b"".join(data for _, data in chunks)


def _bytes(n: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(n)


class Killed(BaseException):
    """The agent killed -9 at this point: nothing after it runs (not an Exception the shipper catches)."""


class KillingStore(ObjectStore):
    """A memory store whose nth log-chunk put dies just before or just after the bytes are stored."""

    def __init__(self, *, nth: int, after: bool) -> None:
        inner = open_store("memory://")
        super().__init__(inner._store, url="memory://")
        self.nth, self.after, self.puts = nth, after, 0

    async def put(self, key: str, data: bytes) -> None:
        if keys.parse_log_chunk(key) is not None:
            self.puts += 1
            if self.puts == self.nth and not self.after:
                raise Killed
            await super().put(key, data)
            if self.puts == self.nth:
                raise Killed
            return
        await super().put(key, data)


class FailingStore(ObjectStore):
    """A store that is away: every operation fails."""

    def __init__(self) -> None:
        super().__init__(None, url="s3://unreachable-bucket")

    async def put(self, key: str, data: bytes) -> None:
        raise ObjectStoreError(f"put {key!r} to {self.url}: connection refused")

    async def put_file(self, key: str, path: Path) -> int:
        raise ObjectStoreError(f"put {key!r} to {self.url}: connection refused")

    async def head(self, key: str) -> Any:
        raise ObjectStoreError(f"head {key!r} on {self.url}: connection refused")


class RecordingStore(ObjectStore):
    """A memory store that remembers the order of its puts."""

    def __init__(self) -> None:
        super().__init__(open_store("memory://")._store, url="memory://")
        self.order: list[str] = []

    async def put(self, key: str, data: bytes) -> None:
        await super().put(key, data)
        self.order.append(key)

    async def put_file(self, key: str, path: Path) -> int:
        size = await super().put_file(key, path)
        self.order.append(key)
        return size


async def test_chunks_concatenate_to_the_output_across_rotations_when_each_round_keeps_within_the_quota(
    tmp_path: Path,
) -> None:
    path = _run_dir(tmp_path)
    store = open_store("memory://")
    shipper = Shipper(store=store, root=tmp_path, chunk_bytes=700)
    out = LogFile(path / files.LOG, quota=4096)
    written = b""
    for i in range(20):
        piece = _bytes(random.Random(i).randint(1, 1900), seed=i)
        out.write(piece)
        written += piece
        await shipper.ship()
    out.close()
    assert out.rotations >= 5
    chunks = await _chunks(store)
    assert all(0 < len(data) <= 700 for _, data in chunks)
    assert await _log(store) == written
    assert files.read_json(path / SHIPPED)["dropped"] == 0  # type: ignore[index]


async def test_output_the_quota_rotated_away_before_a_round_is_counted_as_dropped_not_invented(
    tmp_path: Path,
) -> None:
    path = _run_dir(tmp_path)
    store = open_store("memory://")
    shipper = Shipper(store=store, root=tmp_path)
    out = LogFile(path / files.LOG, quota=4096)
    first, burst = _bytes(1000, 1), _bytes(10_000, 2)
    out.write(first)
    await shipper.ship()
    out.write(burst)  # four rotations: only the last 2048 + 1904 bytes are still on the host
    out.close()
    _exit(path)
    await shipper.ship()
    kept = (path / (files.LOG + ".1")).read_bytes() + (path / files.LOG).read_bytes()
    assert await _log(store) == first + kept
    assert kept == burst[-len(kept) :]
    end = json.loads(await store.get(keys.log_end(WL, PL)))
    assert end["bytes"] == len(first) + len(kept)
    assert end["dropped_bytes"] == len(burst) - len(kept) > 0


@pytest.mark.parametrize("after", [True, False], ids=["after-its-put", "before-its-put"])
async def test_a_shipper_killed_between_chunks_neither_repeats_nor_loses_a_byte(
    tmp_path: Path, after: bool
) -> None:
    path = _run_dir(tmp_path)
    store = KillingStore(nth=3, after=after)
    data = _bytes(5000, 3)
    out = LogFile(path / files.LOG, quota=1 << 20)
    out.write(data)
    out.close()
    with pytest.raises(Killed):
        await Shipper(store=store, root=tmp_path, chunk_bytes=1000).ship()
    assert files.read_json(path / SHIPPED)["pending"]["seq"] == 2  # type: ignore[index]
    await Shipper(store=store, root=tmp_path, chunk_bytes=1000, clock=lambda: time.time() + 60).ship()
    chunks = await _chunks(store)
    assert [seq for seq, _ in chunks] == [0, 1, 2, 3, 4]  # the third under one key only
    assert await _log(store) == data


async def test_a_rotation_caught_half_way_is_read_once_the_supervisor_has_said_where_the_files_are(
    tmp_path: Path,
) -> None:
    path = _run_dir(tmp_path)
    store = open_store("memory://")
    shipper = Shipper(store=store, root=tmp_path)
    out = LogFile(path / files.LOG, quota=4096)
    out.write(b"a" * 2048)
    said = (path / LOG_STATE).read_bytes()
    out.write(b"b" * 10)  # rotates: output.log.1 is the a's, output.log the b's
    rotated = (path / LOG_STATE).read_bytes()
    (path / LOG_STATE).write_bytes(said)  # as if looked at between its rename and its record
    await shipper.ship()
    assert await _chunks(store) == []
    (path / LOG_STATE).write_bytes(rotated)
    await shipper.ship()
    assert await _log(store) == b"a" * 2048 + b"b" * 10
    out.close()


async def test_a_finished_run_ships_its_outputs_within_the_cap_and_lists_the_rest_as_dropped(
    tmp_path: Path,
) -> None:
    path = _run_dir(tmp_path)
    store = RecordingStore()
    outputs = path / files.OUTPUT_DIR
    (outputs / "sub").mkdir()
    (outputs / "a.txt").write_bytes(b"abc")
    (outputs / "sub" / "b.bin").write_bytes(b"0123456789")
    (outputs / "big.bin").write_bytes(b"x" * 100)
    (outputs / "link").symlink_to(path / files.SPEC)
    (outputs / "bad\x01name").write_bytes(b"!")
    (path / files.LOG).write_bytes(b"done\n")
    _exit(path)
    shipper = Shipper(store=store, root=tmp_path, output_cap_bytes=50, clock=lambda: 1_767_225_600.0)
    await shipper.ship()
    manifest = json.loads(await store.get(keys.output_manifest(WL, PL)))
    assert manifest == {
        "workload_id": WL,
        "placement_id": PL,
        "at": "2026-01-01T00:00:00+00:00",
        "files": [{"path": "a.txt", "size": 3}, {"path": "sub/b.bin", "size": 10}],
        "total_bytes": 13,
        "cap_bytes": 50,
        "dropped": [
            {"path": "big.bin", "size": 100, "why": "over the outputs cap of 50 bytes"},
            {"path": "link", "size": 0, "why": "a symbolic link (not followed)"},
            {"path": "bad\x01name", "size": 1, "why": "its name cannot name an object"},
        ],
    }
    assert await store.get(keys.output_file(WL, PL, "sub/b.bin")) == b"0123456789"
    end = json.loads(await store.get(keys.log_end(WL, PL)))
    assert (end["bytes"], end["dropped_bytes"]) == (5, 0)
    assert store.order[-1] == keys.output_manifest(WL, PL)  # last: a manifest means complete
    assert store.order.index(keys.log_end(WL, PL)) > max(
        i for i, k in enumerate(store.order) if keys.parse_log_chunk(k)
    )
    assert is_finalized(path)
    puts = len(store.order)
    await shipper.ship()
    assert len(store.order) == puts  # finalized: nothing is shipped again


async def test_a_failing_store_never_raises_finalizes_nothing_and_is_logged_once_per_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _run_dir(tmp_path)
    (path / files.LOG).write_bytes(b"hello\n")
    _exit(path)
    shipper = Shipper(store=FailingStore(), root=tmp_path)
    with caplog.at_level(logging.ERROR):
        for _ in range(3):
            await shipper.ship()
    assert not is_finalized(path)
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1
    assert "s3://unreachable-bucket" in errors[0]


def _runner(root: Path, shipper: Shipper | None) -> ProcessRunner:
    return ProcessRunner(root=root, card_memory={}, log_quota_bytes=1 << 20, environ={}, shipper=shipper)


async def test_an_exit_is_reported_only_once_its_log_and_outputs_are_in_the_store(tmp_path: Path) -> None:
    path = _run_dir(tmp_path)
    (path / files.OUTPUT_DIR / "result.txt").write_bytes(b"42")
    _exit(path)
    store = open_store("memory://")
    shipper = Shipper(store=store, root=tmp_path)
    runner = _runner(tmp_path, shipper)
    assert runner.poll(now=NOW) == []  # held: nothing is in the store yet
    await shipper.ship()
    (report,) = runner.poll(now=NOW)
    assert (report.workload_id, report.event) == (WL, "finished")
    assert await store.get(keys.output_file(WL, PL, "result.txt")) == b"42"


def test_without_a_shipper_an_exit_is_reported_at_once(tmp_path: Path) -> None:
    _exit(_run_dir(tmp_path))
    (report,) = _runner(tmp_path, None).poll(now=NOW)
    assert report.event == "finished"


async def test_a_failing_store_holds_an_exit_back_only_until_the_give_up_time(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _exit(_run_dir(tmp_path))
    patient = Shipper(store=FailingStore(), root=tmp_path, give_up_s=3600)
    await patient.ship()
    assert _runner(tmp_path, patient).poll(now=NOW) == []
    hasty = Shipper(store=FailingStore(), root=tmp_path, give_up_s=0)
    await hasty.ship()
    with caplog.at_level(logging.ERROR):
        (report,) = _runner(tmp_path, hasty).poll(now=NOW)
    assert report.event == "finished"
    assert any("s3://unreachable-bucket" in r.getMessage() for r in caplog.records)


async def test_the_agent_ships_beside_its_ticks(tmp_path: Path) -> None:
    settings = TelemetrySettings(kafka_bootstrap_servers="kafka-test:9092", kafka_topic_prefix="u.")
    fake = FakePublisher(partitions=settings.kafka_partitions)
    fake.open(bootstrap=settings.kafka_bootstrap_servers, client_id="unit")
    await fake.start()
    path = _run_dir(tmp_path)
    (path / files.LOG).write_bytes(b"bye\n")
    _exit(path)
    store = open_store("memory://")
    runner = _runner(tmp_path, Shipper(store=store, root=tmp_path))
    setup = dataclasses.replace(await simulated_setup(settings=settings, clock=lambda: NOW), runner=runner)
    agent = NodeAgent(settings=settings, setup=setup, clock=lambda: NOW, publisher=fake)
    await agent.tick()
    deadline = time.monotonic() + 5
    while not is_finalized(path):
        assert time.monotonic() < deadline, "the tick did not ship the run"
        await asyncio.sleep(0.01)
    assert await _log(store) == b"bye\n"
    assert files.read_json(path / SHIPPED) is not None
