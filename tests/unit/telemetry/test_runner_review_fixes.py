"""The process and podman runners' edges a review found: a move of a run that ended by itself, a podman
run spec asking for a host-side checkpoint command, the restore dir inside a container, one broken run
among others, and the quick poll of a run refused at launch. None starts a process: runs refused at launch
write their exit without one."""

from __future__ import annotations

import asyncio
import shutil
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from libs.common.events.scheduler import (
    AllocationItem,
    RunCheckpoint,
    RunSpec,
    WorkloadMigratingV1,
    WorkloadPlacedV1,
)
from libs.common.objectstore import open_store
from services.telemetry.adapters.runner import files
from services.telemetry.adapters.runner.binding import bind
from services.telemetry.adapters.runner.podman import PodmanRunner, container_spec
from services.telemetry.adapters.runner.process import ProcessRunner
from services.telemetry.adapters.runner.runs import Launch, spec_doc
from services.telemetry.adapters.runner.ship import Shipper
from services.telemetry.service.agent.placements import PlacementBook
from services.telemetry.service.agent.runner import RunnerReport

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _runner(root: Path, **kw: Any) -> ProcessRunner:
    return ProcessRunner(root=root, card_memory={}, log_quota_bytes=1 << 20, **kw)


def _start(
    runner: ProcessRunner, workload: str = "w1", placement: str = "p1", run: RunSpec | None = None
) -> None:
    runner.start(
        workload_id=workload,
        tenant_id="acme",
        placement_id=placement,
        gpu_uuids=[],
        allocations=[],
        profile="x",
        duration_s=None,
        run=run,
        at=T0,
    )


def _exits(reports: list[RunnerReport]) -> list[tuple[str, str | None]]:
    return [(r.workload_id, r.placement_id) for r in reports if r.event in ("finished", "failed")]


def test_a_run_that_ended_before_its_move_tells_its_exit_and_launches_no_target(tmp_path: Path) -> None:
    shipper = Shipper(store=open_store("memory://"), root=tmp_path)
    runner = _runner(tmp_path, shipper=shipper)
    _start(runner)  # no run spec: refused at launch, its exit written and held for shipping
    assert _exits(runner.poll(now=T0)) == []
    assert runner.migrate(workload_id="w1", placement_id="p2", target_gpu_uuids=[], allocations=[], at=T0)
    asyncio.run(shipper.ship())
    assert _exits(runner.poll(now=T0) + runner.poll(now=T0)) == [("w1", "p1")]
    assert not (tmp_path / files.run_dir_name(workload_id="w1", placement_id="p2")).exists()


def test_the_book_keeps_the_source_of_a_move_whose_run_had_ended_so_its_exit_is_told(tmp_path: Path) -> None:
    shipper = Shipper(store=open_store("memory://"), root=tmp_path)
    runner = _runner(tmp_path, shipper=shipper)
    book = PlacementBook(runner=runner, gpus=frozenset({"GPU-0"}))
    items = [AllocationItem(gpu_uuid="GPU-0", units=Decimal(1), model="H100")]
    placed: dict[str, Any] = {
        "workload_id": "w1",
        "tenant_id": "acme",
        "node": "n1",
        "allocations": items,
        "kind": "job",
    }
    book.apply(WorkloadPlacedV1(placement_id="p1", **placed), at=T0)
    assert book.reports(now=T0) == []
    move = WorkloadMigratingV1(
        workload_id="w1", tenant_id="acme", from_placement_id="p1", to_placement_id="p2"
    )
    book.apply(move, at=T0)
    book.apply(WorkloadPlacedV1(placement_id="p2", **placed), at=T0)
    asyncio.run(shipper.ship())
    told = book.reports(now=T0)
    assert [(e.type, getattr(e, "placement_id", None)) for e in told] == [("agent.workload.exited.v1", "p1")]


def test_podman_refuses_a_run_spec_with_a_checkpoint_command_at_launch(tmp_path: Path) -> None:
    runner = PodmanRunner(root=tmp_path, card_memory={}, log_quota_bytes=1 << 20, cdi=False)
    run = RunSpec(image="img:1", checkpoint=RunCheckpoint(command=["sh", "-c", "cp -r / /x"]))
    _start(runner, run=run)
    reports = runner.poll(now=T0)
    assert [(r.event, r.reason) for r in reports] == [
        ("failed", "podman runner: checkpoint.command is not supported; use checkpoint.signal")
    ]


def test_a_migrations_restore_dir_is_mounted_read_only_at_its_own_path_in_the_container() -> None:
    run_dir = Path("/srv/runs/agent/w1-0123456789abcdef")
    run = RunSpec(image="img:1")
    launch = Launch("w1", "acme", "p1", (), run, moved_from="p0", restore_dir=run_dir / "restore")
    binding = bind(
        workload_id="w1",
        tenant_id="acme",
        allocations=(),
        card_memory={},
        run_env={},
        base_env={"PATH": "/usr/bin"},
        run_dir=run_dir,
        mps_dir=None,
        restore_from=launch.restore_dir,
    )
    doc = spec_doc(launch, env=binding.env, notes=(), log_quota_bytes=1 << 20, cgroup_root=None)
    spec, _ = container_spec(
        doc, launch=launch, path=run_dir, devices=(), podman=["podman"], run_args=[], cdi=False, environ={}
    )
    argv = spec["argv"]
    mounts = [argv[i + 1] for i, a in enumerate(argv) if a == "--mount"]
    restore = run_dir / "restore"
    assert f"type=bind,source={restore},destination={restore},ro" in mounts


def test_a_run_refused_at_launch_leaves_the_quick_poll_once_its_exit_is_seen(tmp_path: Path) -> None:
    runner = _runner(tmp_path, shipper=Shipper(store=open_store("memory://"), root=tmp_path))
    _start(runner)
    runner.poll_starts(now=T0)
    assert not runner.awaiting_start()


def test_a_run_directory_removed_by_hand_fails_that_run_and_not_the_polls_of_the_others(
    tmp_path: Path,
) -> None:
    shipper = Shipper(store=open_store("memory://"), root=tmp_path)
    runner = _runner(tmp_path, shipper=shipper)
    _start(runner, "w1", "p1")
    runner.poll(now=T0)  # refused at launch, its exit held for shipping
    shutil.rmtree(tmp_path / files.run_dir_name(workload_id="w1", placement_id="p1"))
    _start(runner, "w2", "p2")
    reports = runner.poll(now=T0)
    asyncio.run(shipper.ship())
    reports += runner.poll(now=T0)
    assert sorted(_exits(reports)) == [("w1", "p1"), ("w2", "p2")]
    assert "its run directory was removed" in [r.reason for r in reports if r.workload_id == "w1"]
    assert runner.poll(now=T0) == []


def test_a_launch_whose_run_directory_cannot_be_written_is_told_as_failed(tmp_path: Path) -> None:
    runner = _runner(tmp_path)
    (tmp_path / files.run_dir_name(workload_id="w1", placement_id="p1")).write_text("not a directory")
    _start(runner, "w1", "p1")
    _start(runner, "w2", "p2")
    reports = runner.poll(now=T0)
    assert sorted(_exits(reports)) == [("w1", "p1"), ("w2", "p2")]
    assert runner.poll(now=T0) == []
