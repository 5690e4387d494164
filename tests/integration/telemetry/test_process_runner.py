"""The process runner with real processes: exits, stops, limits, GPU binding and re-adoption."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from libs.common.events.scheduler import AllocationItem, RunSpec
from services.telemetry.adapters.runner import cgroups, files
from services.telemetry.adapters.runner.process import RESTARTED, ProcessRunner
from services.telemetry.adapters.runner.report import RunnerReport
from tests.integration.telemetry.runs import until_reported

GPU_A = "GPU-11111111-1111-1111-1111-111111111111"
GPU_B = "GPU-22222222-2222-2222-2222-222222222222"
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _runner(root: Path) -> ProcessRunner:
    return ProcessRunner(root=root, card_memory={}, log_quota_bytes=1 << 20, environ=dict(os.environ))


def _start(
    runner: ProcessRunner, workload: str, *command: str, gpu: str = GPU_A, placement: str = "", **spec: object
) -> None:
    runner.start(
        workload_id=workload,
        tenant_id="acme",
        placement_id=placement or f"pl-{workload}",
        gpu_uuids=[gpu],
        allocations=[AllocationItem(gpu_uuid=gpu, units=Decimal(8), model="H100")],
        profile="training",
        duration_s=None,
        run=RunSpec.model_validate({"command": list(command), **spec}),
        at=NOW,
    )


def _until(
    runner: ProcessRunner, done: Callable[[list[RunnerReport]], bool], *, timeout: float = 10.0
) -> list[RunnerReport]:
    return until_reported(runner, done, timeout=timeout)


def _exit_of(workload: str) -> Callable[[list[RunnerReport]], bool]:
    return lambda seen: any(r.workload_id == workload and r.event != "started" for r in seen)


def _started(*workloads: str) -> Callable[[list[RunnerReport]], bool]:
    return lambda seen: set(workloads) <= {r.workload_id for r in seen if r.event == "started"}


def _exit(seen: list[RunnerReport], workload: str) -> RunnerReport:
    (report,) = [r for r in seen if r.workload_id == workload and r.event != "started"]
    return report


def test_a_job_exiting_3_is_reported_failed_with_exit_code_3_after_its_start_and_its_output_is_logged(
    root: Path,
) -> None:
    runner = _runner(root)
    _start(runner, "wl-3", "sh", "-c", "echo to-out; echo to-err >&2; exit 3")
    seen = _until(runner, _exit_of("wl-3"))
    started, ended = seen
    assert started.event == "started"
    assert started.pid is not None
    assert started.runner == "process"
    assert (ended.event, ended.exit_reason, ended.exit_code, ended.signal) == ("failed", "failed", 3, None)
    log = (root / files.run_dir_name(workload_id="wl-3", placement_id="pl-wl-3") / files.LOG).read_text()
    assert log.splitlines() == ["to-out", "to-err"]


def test_a_job_exiting_0_succeeded(root: Path) -> None:
    runner = _runner(root)
    _start(runner, "wl-0", "true")
    ended = _exit(_until(runner, _exit_of("wl-0")), "wl-0")
    assert (ended.event, ended.exit_reason, ended.exit_code) == ("finished", "succeeded", 0)


def test_a_command_that_does_not_exist_fails_without_starting(root: Path) -> None:
    runner = _runner(root)
    _start(runner, "wl-x", "/nonexistent/program")
    seen = _until(runner, _exit_of("wl-x"))
    assert [r.event for r in seen] == ["failed"]
    assert seen[0].exit_code == 127
    assert "/nonexistent/program" in seen[0].reason


def test_a_cancelled_sleep_ends_by_sigterm_as_cancelled(root: Path) -> None:
    runner = _runner(root)
    _start(runner, "wl-s", "sleep", "30", grace_s=5)
    _until(runner, _started("wl-s"))
    assert runner.stop(workload_id="wl-s", reason="cancelled") is True
    ended = _exit(_until(runner, _exit_of("wl-s"), timeout=4), "wl-s")
    assert (ended.exit_reason, ended.signal, ended.exit_code) == ("cancelled", signal.SIGTERM, None)


def test_a_preempted_workload_trapping_sigterm_is_sigkilled_after_its_grace(root: Path) -> None:
    runner = _runner(root)
    trapping = (
        "trap 'echo got-term' TERM; touch \"$GPUCLOUD_OUTPUT_DIR/trapped\"; while :; do sleep 0.1; done"
    )
    _start(runner, "wl-t", "sh", "-c", trapping, grace_s=0.5)
    run = root / files.run_dir_name(workload_id="wl-t", placement_id="pl-wl-t")
    _until(runner, lambda _: (run / files.OUTPUT_DIR / "trapped").exists())  # its trap is set
    stopped = time.monotonic()
    runner.stop(workload_id="wl-t", reason="preempted")
    ended = _exit(_until(runner, _exit_of("wl-t")), "wl-t")
    assert (ended.exit_reason, ended.signal) == ("preempted", signal.SIGKILL)
    assert time.monotonic() - stopped >= 0.5
    assert "got-term" in (run / files.LOG).read_text()


def test_the_time_limit_ends_a_workload_as_time_limit(root: Path) -> None:
    runner = _runner(root)
    _start(runner, "wl-l", "sleep", "30", time_limit_s=0.5, grace_s=1)
    ended = _exit(_until(runner, _exit_of("wl-l")), "wl-l")
    assert (ended.exit_reason, ended.signal) == ("time_limit", signal.SIGTERM)


def test_two_workloads_on_two_gpus_see_disjoint_gpus_and_the_platform_environment(root: Path) -> None:
    runner = _runner(root)
    dump = 'env > "$GPUCLOUD_OUTPUT_DIR/env.txt"'
    _start(runner, "wl-a", "sh", "-c", dump, gpu=GPU_A, env={"MY_SETTING": "1"})
    _start(runner, "wl-b", "sh", "-c", dump, gpu=GPU_B)
    _until(runner, lambda seen: _exit_of("wl-a")(seen) and _exit_of("wl-b")(seen))
    envs = {}
    for workload in ("wl-a", "wl-b"):
        run = root / files.run_dir_name(workload_id=workload, placement_id=f"pl-{workload}")
        text = (run / files.OUTPUT_DIR / "env.txt").read_text()
        envs[workload] = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
        assert envs[workload]["GPUCLOUD_CHECKPOINT_DIR"] == str(run / files.CHECKPOINT_DIR)
        assert (run / files.CHECKPOINT_DIR).is_dir()
    a, b = envs["wl-a"], envs["wl-b"]
    assert (a["CUDA_VISIBLE_DEVICES"], b["CUDA_VISIBLE_DEVICES"]) == (GPU_A, GPU_B)
    assert (a["NVIDIA_VISIBLE_DEVICES"], b["NVIDIA_VISIBLE_DEVICES"]) == (GPU_A, GPU_B)
    assert a["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert (a["GPUCLOUD_WORKLOAD_ID"], a["GPUCLOUD_TENANT_ID"], a["MY_SETTING"]) == ("wl-a", "acme", "1")
    assert "GPUCLOUD_RESTORE_FROM" not in a


def test_a_new_runner_adopts_a_running_workload_and_reports_one_that_ended_meanwhile_once(
    root: Path, tmp_path: Path
) -> None:
    starts, go = tmp_path / "starts", tmp_path / "go"
    first = _runner(root)
    _start(first, "wl-run", "sh", "-c", 'echo run >> "$STARTS"; sleep 30', env={"STARTS": str(starts)})
    wait = f'echo end >> "$STARTS"; while [ ! -e "{go}" ]; do sleep 0.05; done; exit 4'
    _start(first, "wl-end", "sh", "-c", wait, env={"STARTS": str(starts)})
    _until(first, _started("wl-run", "wl-end"))
    del first  # the agent dies: its supervisors live on

    go.touch()
    ended_dir = root / files.run_dir_name(workload_id="wl-end", placement_id="pl-wl-end")
    deadline = time.monotonic() + 5
    while not (ended_dir / files.EXIT).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    second = _runner(root)
    _start(second, "wl-run", "sh", "-c", "never run")  # the replay places both again
    _start(second, "wl-end", "sh", "-c", "never run")
    seen = _until(second, _exit_of("wl-end"))
    for _ in range(5):
        seen.extend(second.poll(now=NOW))
        second.delivered()
        time.sleep(0.05)
    assert [(r.workload_id, r.event, r.exit_code) for r in seen] == [("wl-end", "failed", 4)]
    assert sorted(starts.read_text().split()) == ["end", "run"]  # nothing started twice
    assert _runner(root).poll(now=NOW) == []  # told once, never again

    assert second.stop(workload_id="wl-run") is True  # the adopted one is still ours to stop
    ended = _exit(_until(second, _exit_of("wl-run")), "wl-run")
    assert (ended.exit_reason, ended.signal) == ("cancelled", signal.SIGTERM)


def test_a_migrated_workload_restarts_from_the_start_on_its_new_gpu_and_its_old_run_is_not_an_exit(
    root: Path, tmp_path: Path
) -> None:
    seen_gpus = tmp_path / "gpus"
    runner = _runner(root)
    script = 'echo "$CUDA_VISIBLE_DEVICES ${GPUCLOUD_RESTORE_FROM:-none}" >> "$SEEN"; sleep 30'
    _start(runner, "wl-m", "sh", "-c", script, env={"SEEN": str(seen_gpus)}, grace_s=1)
    _until(runner, _started("wl-m"))
    runner.migrate(
        workload_id="wl-m",
        placement_id="pl-wl-m-2",
        target_gpu_uuids=[GPU_B],
        allocations=[AllocationItem(gpu_uuid=GPU_B, units=Decimal(8), model="H100")],
        at=NOW,
    )
    seen = _until(runner, lambda s: any(r.placement_id == "pl-wl-m-2" for r in s))
    moved, running = seen  # started, then the migration's last step (its run spec asks no checkpoint)
    assert moved.event == "started"
    assert RESTARTED in moved.reason
    assert (running.phase, running.restored, running.reason) == ("running", False, moved.notes[0])
    old = root / files.run_dir_name(workload_id="wl-m", placement_id="pl-wl-m")
    deadline = time.monotonic() + 5
    while not (old / files.EXIT).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [r for r in runner.poll(now=NOW) if r.placement_id == "pl-wl-m"] == []
    assert seen_gpus.read_text().splitlines() == [f"{GPU_A} none", f"{GPU_B} none"]


def test_a_workload_over_its_memory_limit_is_oom_killed(root: Path) -> None:
    group, said = cgroups.prepare(name="gpucloud-probe", root=None, memory_bytes=64 << 20, cpu_millis=None)
    if group is None:
        pytest.skip(f"no cgroup v2 memory limit on this host: {said}")
    group.remove()
    runner = _runner(root)
    hog = "x = []\nwhile True:\n    x.append(bytearray(16 << 20))"
    _start(runner, "wl-oom", sys.executable, "-c", hog, memory_bytes=64 << 20)
    ended = _exit(_until(runner, _exit_of("wl-oom"), timeout=20), "wl-oom")
    assert (ended.exit_reason, ended.signal) == ("oom_killed", signal.SIGKILL)


def test_output_past_the_log_quota_keeps_the_newest_bytes_within_the_quota(root: Path) -> None:
    runner = ProcessRunner(root=root, card_memory={}, log_quota_bytes=4096, environ=dict(os.environ))
    _start(runner, "wl-log", sys.executable, "-c", "for i in range(2000): print(f'line {i:05}')")
    _until(runner, _exit_of("wl-log"))
    run = root / files.run_dir_name(workload_id="wl-log", placement_id="pl-wl-log")
    kept = [run / files.LOG, run / f"{files.LOG}.1"]
    assert sum(p.stat().st_size for p in kept) <= 4096
    assert (run / files.LOG).read_text().endswith("line 01999\n")


def test_a_placement_ended_before_the_next_poll_never_launches(root: Path) -> None:
    runner = _runner(root)  # as in a replay of the scheduler topic: placed, then ended
    _start(runner, "wl-old", "sleep", "30")
    assert runner.stop(workload_id="wl-old") is False
    assert runner.poll(now=NOW) == []
    assert runner.runs == 0


def test_a_workload_whose_supervisor_was_killed_is_killed_and_reported_failed(root: Path) -> None:
    first = _runner(root)
    _start(first, "wl-orphan", "sleep", "30")
    _until(first, _started("wl-orphan"))
    run = root / files.run_dir_name(workload_id="wl-orphan", placement_id="pl-wl-orphan")
    supervisor, child = files.read_json(run / files.SUPERVISOR), files.read_json(run / files.STARTED)
    assert supervisor is not None
    assert child is not None
    os.kill(int(supervisor["pid"]), signal.SIGKILL)
    ended = _exit(_until(first, _exit_of("wl-orphan")), "wl-orphan")
    assert (ended.exit_reason, ended.reason) == ("failed", "its supervisor died; the workload was killed")
    deadline = time.monotonic() + 5
    while files.process_start(int(child["pid"])) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert files.process_start(int(child["pid"])) is None
