"""Migration by checkpoint: the request's rules, the manifest, the restore and the events that tell it."""

from __future__ import annotations

import asyncio
import json
import signal
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from libs.common.events.agent import MigrationStepV1
from libs.common.events.scheduler import (
    AllocationItem,
    RunCheckpoint,
    RunSpec,
    WorkloadEndedV1,
    WorkloadMigratingV1,
    WorkloadPlacedV1,
)
from libs.common.objectstore import ObjectStore, keys, open_store
from services.recovery.domain.workload_moves import Migration, MigrationPhase, apply_progress
from services.scheduler.adapters.catalog_loader import load_default_catalog
from services.scheduler.domain.creation import parse_spec, run_of
from services.scheduler.domain.errors import ValidationError
from services.telemetry.adapters.runner import files
from services.telemetry.adapters.runner.binding import bind
from services.telemetry.adapters.runner.checkpointing import COMPLETE, Checkpointing, wanted
from services.telemetry.adapters.runner.moves import MOVED, RESTARTED, RESTORE_DIR, Mover, overall
from services.telemetry.service.agent.placements import PlacementBook
from services.telemetry.service.agent.runner import RunnerReport
from tests.unit.telemetry.test_agent_runner_book import RecordingRunner

T0 = datetime(2026, 1, 1, tzinfo=UTC)
GPU_A, GPU_B = "GPU-a", "GPU-b"
CATALOG = load_default_catalog()
SPEC: dict[str, Any] = {
    "image": {"name": "pytorch", "version": "2.3"},
    "resources": {"kind": "gpu", "model": "A100", "count": 1},
    "network": {"vpc_id": "vpc-main1", "subnet_id": "subnet-a001", "security_group_id": "sg-default"},
    "command": ["python", "train.py"],
}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


# -- the run spec's checkpoint, at the scheduler's API


def test_a_checkpoint_by_signal_or_command_is_accepted_and_reaches_the_placed_run_spec() -> None:
    spec = parse_spec({**SPEC, "checkpoint": {"signal": "SIGUSR1", "timeout_s": 30}}, catalog=CATALOG)
    run = RunSpec.model_validate(run_of(spec, catalog=CATALOG).model_dump())
    assert run.checkpoint == RunCheckpoint(signal="SIGUSR1", timeout_s=30)
    by_command = parse_spec({**SPEC, "checkpoint": {"command": ["./save.sh"]}}, catalog=CATALOG)
    assert by_command.checkpoint is not None
    assert by_command.checkpoint.timeout_s == 60


@pytest.mark.parametrize(
    ("checkpoint", "field"),
    [
        ({"signal": "SIGKILL"}, "checkpoint.signal"),
        ({"signal": "USR1"}, "checkpoint.signal"),
        ({"command": []}, "checkpoint.command"),
        ({"signal": "SIGUSR1", "timeout_s": 0}, "checkpoint.timeout_s"),
        ({"signal": "SIGUSR1", "timeout_s": 3601}, "checkpoint.timeout_s"),
        ({"signal": "SIGUSR1", "command": ["x"]}, "checkpoint"),
        ({}, "checkpoint"),
        ({"signal": "SIGUSR1", "every_s": 5}, "checkpoint.every_s"),
    ],
)
def test_a_bad_checkpoint_is_refused_naming_its_field(checkpoint: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        parse_spec({**SPEC, "checkpoint": checkpoint}, catalog=CATALOG)
    assert caught.value.field == field


def test_a_run_spec_from_before_the_checkpoint_has_none() -> None:
    assert RunSpec.model_validate({"command": ["x"]}).checkpoint is None


# -- the supervisor's request


def test_only_a_move_the_agent_asks_a_checkpoint_for_requests_one() -> None:
    spec = {"run": {"checkpoint": {"signal": "SIGUSR1"}}}
    assert wanted(spec, {"reason": "moved", "checkpoint": True}) == {"signal": "SIGUSR1"}
    assert wanted(spec, {"reason": "moved", "checkpoint": False}) is None  # no store to carry it
    assert wanted(spec, {"reason": "cancelled", "checkpoint": True}) is None
    assert wanted({"run": {}}, {"reason": "moved", "checkpoint": True}) is None


def test_the_checkpoint_is_complete_when_the_marker_appears_and_a_stale_one_does_not_count(
    tmp_path: Path,
) -> None:
    (tmp_path / COMPLETE).touch()  # left by an earlier checkpoint
    clock = Clock()
    asked = Checkpointing({"signal": "SIGKILL"}, checkpoint_dir=tmp_path, run_dir=tmp_path, clock=clock)
    sent: list[int] = []
    asked.begin(send=sent.append, env={}, cwd=str(tmp_path))
    assert not (tmp_path / COMPLETE).exists()
    assert asked.result is not None
    assert not asked.result.complete  # SIGKILL cannot be caught: refused, never sent

    waiting = Checkpointing(
        {"signal": "SIGUSR1", "timeout_s": 5}, checkpoint_dir=tmp_path, run_dir=tmp_path, clock=clock
    )
    waiting.begin(send=sent.append, env={}, cwd=str(tmp_path))
    assert sent == [signal.SIGUSR1]
    assert waiting.poll() is None
    clock.now = 1.0
    (tmp_path / COMPLETE).touch()
    result = waiting.poll()
    assert result is not None
    assert result.complete
    assert result.took_s == 1.0


def test_no_marker_within_the_timeout_or_before_the_workload_ends_is_a_failed_checkpoint(
    tmp_path: Path,
) -> None:
    clock = Clock()
    late = Checkpointing(
        {"signal": "SIGUSR1", "timeout_s": 2}, checkpoint_dir=tmp_path, run_dir=tmp_path, clock=clock
    )
    clock.now = 1.9
    assert late.poll() is None
    clock.now = 2.0
    assert late.poll() == late.result
    assert late.result is not None
    assert late.result.why == "no checkpoint within 2s"
    gone = Checkpointing({"signal": "SIGUSR1"}, checkpoint_dir=tmp_path, run_dir=tmp_path, clock=clock)
    result = gone.poll(workload_alive=False)
    assert result is not None
    assert result.why == f"the workload ended without creating {COMPLETE}"


# -- the environment


def test_a_restored_workload_sees_its_checkpoint_and_nothing_else_sets_it(tmp_path: Path) -> None:
    common: dict[str, Any] = {
        "workload_id": "w1",
        "tenant_id": "acme",
        "allocations": [AllocationItem(gpu_uuid=GPU_A, units=Decimal(8), model="H100")],
        "card_memory": {},
        "base_env": {"PATH": "/bin", "GPUCLOUD_RESTORE_FROM": "/agent/own"},
        "run_dir": tmp_path,
        "mps_dir": None,
    }
    restored = bind(**common, run_env={}, restore_from=tmp_path / RESTORE_DIR)
    assert restored.env["GPUCLOUD_RESTORE_FROM"] == str(tmp_path / RESTORE_DIR)
    assert restored.env["GPUCLOUD_CHECKPOINT_DIR"] == str(tmp_path / "checkpoints")
    assert "GPUCLOUD_RESTORE_FROM" not in bind(**common, run_env={}).env


# -- the mover: manifest and restore through a store


def _source(root: Path, *, checkpoint: dict[str, Any] | None, state: bytes = b"") -> Path:
    path = root / "source"
    (path / files.CHECKPOINT_DIR / "model").mkdir(parents=True)
    if state:
        (path / files.CHECKPOINT_DIR / "model" / "state.bin").write_bytes(state)
        (path / files.CHECKPOINT_DIR / "step.txt").write_bytes(b"42")
        (path / files.CHECKPOINT_DIR / COMPLETE).touch()
    exit_doc: dict[str, Any] = {"reason": "cancelled", "stop": "moved"}
    if checkpoint is not None:
        exit_doc["checkpoint"] = checkpoint
    files.write_json(path / files.EXIT, exit_doc)
    return path


async def _settle(*movers: Mover) -> None:
    for _ in range(200):
        for mover in movers:
            await mover.step()
        if not any(m.busy for m in movers):
            return
        await asyncio.sleep(0.005)  # a file's size is read in a thread
    raise AssertionError("the movers did not finish")


async def _manifest(store: ObjectStore, placement: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(await store.get(keys.checkpoint_manifest("w1", placement)))
    return doc


def test_a_checkpoint_is_uploaded_with_its_manifest_last_and_restored_byte_for_byte(tmp_path: Path) -> None:
    async def go() -> None:
        store = open_store("memory://")
        source = _source(tmp_path, checkpoint={"complete": True, "why": ""}, state=b"x" * 1000)
        src, dst = Mover(store=store, poll_s=0), Mover(store=store, poll_s=0)
        src.leave(path=source, workload_id="w1", placement_id="p1")
        await _settle(src)
        manifest = await _manifest(store, "p1")
        assert manifest["complete"] is True
        assert manifest["files"] == [
            {"path": "model/state.bin", "size": 1000},
            {"path": "step.txt", "size": 2},
        ]
        assert manifest["total_bytes"] == 1002
        assert (source / MOVED).exists()
        steps = [(r.phase, r.bytes_done, r.bytes_total, r.last) for r in src.take_reports()]
        assert steps == [
            ("checkpoint", None, None, False),
            ("checkpoint", None, None, False),
            ("transfer", 0, 1002, False),
            ("transfer", 1000, 1002, False),
            ("transfer", 1002, 1002, True),
        ]
        src.leave(path=source, workload_id="w1", placement_id="p1")
        assert src.busy == 0  # never uploaded twice

        target = tmp_path / "target"
        dst.restore(path=target, workload_id="w1", placement_id="p2", source_placement_id="p1")
        await _settle(dst)
        (ready,) = dst.take_restored()
        assert ready.path == target / RESTORE_DIR
        assert (ready.path / "model" / "state.bin").read_bytes() == b"x" * 1000
        assert not (ready.path / COMPLETE).exists()
        assert ready.note == "restored from the checkpoint of p1 (2 file(s), 1002 bytes)"
        restore = [(r.bytes_done, round(r.percent or 0)) for r in dst.take_reports()]
        assert restore == [(0, 50), (1000, 95), (1002, 95)]

    asyncio.run(go())


def test_a_workload_that_could_not_checkpoint_leaves_a_manifest_saying_why_and_its_target_starts_over(
    tmp_path: Path,
) -> None:
    async def go() -> None:
        store = open_store("memory://")
        source = _source(tmp_path, checkpoint={"complete": False, "why": "no checkpoint within 1s"})
        src, dst = Mover(store=store, poll_s=0), Mover(store=store, poll_s=0)
        src.leave(path=source, workload_id="w1", placement_id="p1")
        dst.restore(path=tmp_path / "target", workload_id="w1", placement_id="p2", source_placement_id="p1")
        await _settle(src, dst)
        assert (await _manifest(store, "p1"))["complete"] is False
        (said,) = src.take_reports()[-1:]
        assert said.reason == "no checkpoint: no checkpoint within 1s"
        assert said.last
        (ready,) = dst.take_restored()
        assert ready.path is None
        assert ready.note == f"{RESTARTED}: p1 could not checkpoint: no checkpoint within 1s"

    asyncio.run(go())


def test_a_target_whose_checkpoint_never_comes_starts_over_after_the_wait(tmp_path: Path) -> None:
    async def go() -> None:
        clock = Clock()
        dst = Mover(store=open_store("memory://"), wait_s=120, poll_s=0, clock=clock)
        dst.restore(path=tmp_path / "t", workload_id="w1", placement_id="p2", source_placement_id="p1")
        await dst.step()
        for _ in range(5):
            await asyncio.sleep(0)
        assert dst.take_restored() == []  # still waiting
        clock.now = 120.0
        await _settle(dst)
        (ready,) = dst.take_restored()
        assert (ready.path, ready.note) == (None, f"{RESTARTED}: no checkpoint of p1 came within 120s")

    asyncio.run(go())


def test_the_overall_percent_never_falls_from_phase_to_phase() -> None:
    marks = [
        overall("checkpoint", done=0, total=0) - 10,
        overall("transfer", done=0, total=10),
        overall("transfer", done=10, total=10),
        overall("restore", done=0, total=10),
        overall("restore", done=10, total=10),
    ]
    assert marks == sorted(marks) == [0.0, 10.0, 50.0, 50.0, 95.0]


# -- the book: a target on another agent, and a source's steps after its placement ended


class MovingRunner(RecordingRunner):
    def expect_move(self, **kw: Any) -> None:
        self.calls.append(("expect_move", kw))


def _placed(placement: str, gpu: str, node: str) -> WorkloadPlacedV1:
    return WorkloadPlacedV1(
        workload_id="w1",
        tenant_id="acme",
        placement_id=placement,
        node=node,
        allocations=[AllocationItem(gpu_uuid=gpu, units=Decimal(8), model="H100")],
        kind="job",
        run=RunSpec(command=["x"], checkpoint=RunCheckpoint(signal="SIGUSR1")),
    )


MIGRATING = WorkloadMigratingV1(
    workload_id="w1", tenant_id="acme", from_placement_id="p1", to_placement_id="p2"
)
ENDED = WorkloadEndedV1(workload_id="w1", tenant_id="acme", placement_id="p1", outcome="migrated")


def test_the_target_agent_is_told_which_placement_its_start_moves_from() -> None:
    runner = MovingRunner()
    book = PlacementBook(runner=runner, gpus=frozenset({GPU_B}))
    for event in (_placed("p1", GPU_A, "n1"), MIGRATING, _placed("p2", GPU_B, "n2"), ENDED):
        book.apply(event, at=T0)
    assert [c for c, _ in runner.calls] == ["expect_move", "start"]
    assert runner.calls[0][1] == {"workload_id": "w1", "placement_id": "p2", "from_placement_id": "p1"}


def test_the_source_agent_tells_its_checkpoint_and_transfer_steps_until_the_last() -> None:
    runner = MovingRunner()
    book = PlacementBook(runner=runner, gpus=frozenset({GPU_A}))
    for event in (_placed("p1", GPU_A, "n1"), MIGRATING, _placed("p2", GPU_B, "n2"), ENDED):
        book.apply(event, at=T0)
    step = RunnerReport(
        "w1", "progress", T0, "transfer", 30.0, placement_id="p1", bytes_done=5, bytes_total=10
    )
    runner.queued = [step, RunnerReport("w1", "progress", T0, "transfer", 50.0, placement_id="p1", last=True)]
    first, last = book.reports(now=T0)
    assert isinstance(first, MigrationStepV1)
    assert (first.placement_id, first.node, first.phase, first.percent) == ("p1", "n1", "transfer", 30)
    assert (first.bytes_done, first.bytes_total) == (5, 10)
    assert isinstance(last, MigrationStepV1)
    assert not book.holds("w1")
    runner.queued = [step]
    assert book.reports(now=T0) == []  # after the last, nothing more about it


def test_a_step_from_an_agent_before_the_byte_fields_reads_with_their_defaults() -> None:
    ids = {"workload_id": "w1", "tenant_id": "acme", "placement_id": "p1", "node": "n1"}
    step = MigrationStepV1.model_validate({**ids, "phase": "transfer", "percent": 30})
    assert (step.bytes_done, step.bytes_total, step.restored, step.note) == (None, None, None, "")


# -- recovery: the incident says the move restarted from the start


def test_the_incidents_migration_keeps_whether_it_restored_and_the_hosts_note() -> None:
    moving = Migration(workload_id="w1", phase=MigrationPhase.RESTORE, percent=60)
    note = f"{RESTARTED}: p1 could not checkpoint: no checkpoint within 1s"
    ran = apply_progress(moving, phase=MigrationPhase.RUNNING, percent=100, at=T0, restored=False, note=note)
    assert ran is not None
    assert (ran.restored, ran.note, ran.done) == (False, note, True)
    assert Migration.model_validate({"workload_id": "w1"}).note == ""  # an incident stored before
