from __future__ import annotations

import pytest

from services.telemetry.adapters.sim import Phase, ProfileKind, SimFleet
from services.telemetry.adapters.sim.workloads import WorkloadPlayer, migration_durations_s
from services.telemetry.domain.metrics import GpuSample
from tests.unit.telemetry.conftest import T0, at

GIB = 1024**3


def test_a_job_starts_after_its_start_up_delay_and_finishes_after_its_duration() -> None:
    player = WorkloadPlayer()
    player.assign(gpu_uuid="GPU-a", workload_id="j", kind=ProfileKind.TRAINING, started_at=T0, duration_s=600)
    assert player.advance(now=at(44)) == []
    started = player.advance(now=at(46))
    assert [(r.event, r.at) for r in started] == [("started", at(45))]
    finished = player.advance(now=at(700))
    assert [(r.event, r.at, r.reason) for r in finished] == [("finished", at(645), "completed")]
    assert player.get("j") is None


def test_one_late_advance_reports_start_and_finish_in_order() -> None:
    player = WorkloadPlayer()
    player.assign(
        gpu_uuid="GPU-a", workload_id="j", kind=ProfileKind.INTERACTIVE, started_at=T0, duration_s=10
    )
    assert [r.event for r in player.advance(now=at(100))] == ["started", "finished"]


def test_a_service_without_duration_runs_until_released() -> None:
    player = WorkloadPlayer()
    player.assign(
        gpu_uuid="GPU-a", workload_id="svc", kind=ProfileKind.INFERENCE, started_at=T0, duration_s=None
    )
    player.advance(now=at(30))
    assert player.advance(now=at(86_400)) == []
    assert player.release(workload_id="svc") is not None
    assert player.on_gpu("GPU-a") == []


def test_migration_step_durations_grow_with_the_state_to_move() -> None:
    small = migration_durations_s(memory_bytes=1 * GIB, kind=ProfileKind.TRAINING)
    large = migration_durations_s(memory_bytes=60 * GIB, kind=ProfileKind.TRAINING)
    assert [p for p, _ in large] == [Phase.CHECKPOINT, Phase.TRANSFER, Phase.RESTORE]
    assert all(b > a for (_, a), (_, b) in zip(small, large, strict=True))
    assert 60 < sum(d for _, d in large) < 180  # an 80 GB card's job moves within the article's 3 minutes


def test_a_migration_checkpoints_transfers_and_restores_on_the_target(fleet: SimFleet) -> None:
    gpus = [g.uuid for g in fleet.discovery(hostname="node-a").gpus]
    fleet.assign_workload(
        gpu_uuid=gpus[0], workload_id="j", kind=ProfileKind.TRAINING, started_at=T0, duration_s=3600
    )
    fleet.advance(now=at(100))
    steps = fleet.player.migrate(workload_id="j", target_gpu_uuid=gpus[1], now=at(100))
    total = sum(d for _, d in steps)
    phases: list[str | None] = []
    progress: list[float] = []
    for second in range(101, int(100 + total) + 2):
        for report in fleet.advance(now=at(second)):
            phases.append(report.phase)
            assert report.progress_pct is not None
            progress.append(report.progress_pct)
    assert list(dict.fromkeys(phases)) == ["checkpoint", "transfer", "restore", "running"]
    assert progress == sorted(progress)
    assert progress[-1] == 100.0
    workload = fleet.player.get("j")
    assert workload is not None
    assert workload.gpu_uuid == gpus[1]
    assert workload.phase is Phase.RUNNING
    # It resumes with the run time it had left: 3600 s minus the 55 s it ran before the checkpoint.
    assert workload.phase_ends_at == pytest.approx(at(100 + total + 3545).timestamp())


def test_the_target_gpu_carries_the_load_after_restore(fleet: SimFleet) -> None:
    gpus = [g.uuid for g in fleet.discovery(hostname="node-a").gpus]
    fleet.assign_workload(gpu_uuid=gpus[0], workload_id="j", kind=ProfileKind.TRAINING, started_at=T0)
    fleet.advance(now=at(60))
    fleet.migrate_workload(workload_id="j", target_gpu_uuid=gpus[1], now=at(60))
    for second in range(61, 400):
        fleet.advance(now=at(second))
        readings = fleet.sample_node(hostname="node-a", now=at(second))
    source, target = readings[0], readings[1]
    assert isinstance(source, GpuSample)
    assert isinstance(target, GpuSample)
    assert source.sm_util_pct is not None
    assert source.sm_util_pct < 5
    assert target.sm_util_pct is not None
    assert target.sm_util_pct > 75


def test_a_failed_gpu_fails_only_its_own_workloads() -> None:
    player = WorkloadPlayer()
    player.assign(
        gpu_uuid="GPU-a", workload_id="a", kind=ProfileKind.TRAINING, started_at=T0, duration_s=None
    )
    player.assign(
        gpu_uuid="GPU-b", workload_id="b", kind=ProfileKind.TRAINING, started_at=T0, duration_s=None
    )
    player.fail_gpu(gpu_uuid="GPU-a", now=at(5), reason="XID 79")
    reports = player.advance(now=at(6))
    assert [(r.workload_id, r.event, r.at) for r in reports] == [("a", "failed", at(5))]
    assert player.get("b") is not None
