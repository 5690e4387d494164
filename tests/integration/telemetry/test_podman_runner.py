"""The podman runner with real containers: exits, logs, labels, stops, limits, GPU binding, re-adoption.

The image is built here with no registry: Debian's busybox-static unpacked into a root filesystem and
``podman import``-ed (kept in podman's storage, so later sessions reuse it). Everything skips, saying
why, where podman is missing or cannot run a container; this host's podman needs ``--runtime runc``
and ulimits no higher than conmon's, which the fixture finds by trying (docs/executors.md).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from libs.common.events.scheduler import AllocationItem, RunSpec
from services.telemetry.adapters.runner import files
from services.telemetry.adapters.runner.podman import LABEL_WORKLOAD, PodmanRunner, container_name
from services.telemetry.adapters.runner.podman_supervise import CIDFILE
from services.telemetry.adapters.runner.report import RunnerReport
from tests.integration.telemetry.runs import until_reported

IMAGE = "localhost/gpucloud-test:1"
GPU_A = "GPU-11111111-1111-1111-1111-111111111111"
GPU_B = "GPU-22222222-2222-2222-2222-222222222222"
NOW = datetime(2026, 1, 1, tzinfo=UTC)
APPLETS = ("sh", "sleep", "echo", "cat", "env", "yes", "head", "printenv", "ls", "true")
#: Tried in order until one runs a container: plain, then what this kind of sandbox needs (ulimits at
#: most conmon's; runc, as crun refuses a hybrid cgroup layout).
CANDIDATE_RUN_ARGS: tuple[tuple[str, ...], ...] = (
    (),
    ("--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"),
    ("--runtime", "runc", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"),
)


def _podman(
    *args: str, stdin: bytes | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["podman", *args], input=stdin, capture_output=True, timeout=timeout, check=False)


def _build_image() -> str | None:
    """localhost/gpucloud-test:1 from busybox-static; None when built or present, else why not."""
    if _podman("image", "exists", IMAGE).returncode == 0:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        got = subprocess.run(
            ["apt-get", "download", "-q", "busybox-static"],
            cwd=tmp,
            capture_output=True,
            timeout=120,
            check=False,
        )
        debs = list(Path(tmp).glob("busybox-static_*.deb"))
        if got.returncode != 0 or not debs:
            return f"cannot fetch busybox-static for the test image: {got.stderr.decode().strip()[-200:]}"
        rootfs = Path(tmp) / "rootfs"
        subprocess.run(["dpkg-deb", "-x", str(debs[0]), str(rootfs)], check=True, timeout=60)
        for applet in APPLETS:
            (rootfs / "bin" / applet).symlink_to("busybox")
        for sub in ("tmp", "proc", "sys", "dev", "etc"):
            (rootfs / sub).mkdir(exist_ok=True)
        tar = subprocess.run(["tar", "-C", str(rootfs), "-c", "."], capture_output=True, check=True)
        imported = _podman("import", "-", IMAGE, stdin=tar.stdout)
        if imported.returncode != 0:
            return f"podman import failed: {imported.stderr.decode().strip()[-200:]}"
    return None


@pytest.fixture(scope="session")
def run_args() -> tuple[str, ...]:
    """The podman run options this host needs; skips the module where podman cannot run a container."""
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed (make test installs Debian's podman where apt-get can)")
    why = _build_image()
    if why is not None:
        pytest.skip(why)
    tried = []
    for args in CANDIDATE_RUN_ARGS:
        done = _podman("run", "--rm", "--network", "none", *args, IMAGE, "true")
        if done.returncode == 0:
            return args
        tried.append(done.stderr.decode(errors="replace").strip().splitlines()[-1:])
    pytest.skip(f"podman cannot run a container here: {tried}")


@pytest.fixture
def runner_of(tmp_path: Path, run_args: tuple[str, ...]) -> Iterator[Callable[[], PodmanRunner]]:
    """A new podman runner on the same root at each call; the test's containers are removed after it."""
    root = tmp_path / "runs"

    def make() -> PodmanRunner:
        return PodmanRunner(
            root=root,
            card_memory={},
            log_quota_bytes=1 << 20,
            environ=dict(os.environ),
            run_args=run_args,
            cdi=False,  # the test GPUs are made-up UUIDs
        )

    yield make
    names = [container_name(p.name) for p in root.glob("*") if p.is_dir()]
    if names:
        _podman("rm", "--force", "--ignore", "--time", "0", *names)


def _start(
    runner: PodmanRunner,
    workload: str,
    script: str,
    *,
    gpus: Sequence[str] = (GPU_A,),
    image: str = IMAGE,
    **spec: object,
) -> None:
    runner.start(
        workload_id=workload,
        tenant_id="acme",
        placement_id=f"pl-{workload}",
        gpu_uuids=list(gpus),
        allocations=[AllocationItem(gpu_uuid=g, units=Decimal(8), model="H100") for g in gpus],
        profile="training",
        duration_s=None,
        run=RunSpec.model_validate({"image": image, "command": ["sh", "-c", script], **spec}),
        at=NOW,
    )


def _until(
    runner: PodmanRunner, done: Callable[[list[RunnerReport]], bool], *, timeout: float = 15.0
) -> list[RunnerReport]:
    return until_reported(runner, done, timeout=timeout)


def _ended(workload: str) -> Callable[[list[RunnerReport]], bool]:
    return lambda seen: any(r.workload_id == workload and r.event != "started" for r in seen)


def _started(workload: str) -> Callable[[list[RunnerReport]], bool]:
    return lambda seen: any(r.workload_id == workload and r.event == "started" for r in seen)


def _run_dir(runner: PodmanRunner, workload: str) -> Path:
    return runner.root / files.run_dir_name(workload_id=workload, placement_id=f"pl-{workload}")


def _log(runner: PodmanRunner, workload: str) -> str:
    return (_run_dir(runner, workload) / files.LOG).read_text()


def _containers(workload: str) -> list[dict[str, object]]:
    done = _podman("ps", "--all", "--format", "json", "--filter", f"label={LABEL_WORKLOAD}={workload}")
    listed = json.loads(done.stdout or b"[]")
    return listed if isinstance(listed, list) else []


def test_a_container_exit_code_and_its_output_reach_the_exit_report(
    runner_of: Callable[[], PodmanRunner],
) -> None:
    runner = runner_of()
    _start(runner, "exits", "echo to-stdout; echo to-stderr >&2; exit 3")

    seen = _until(runner, _ended("exits"))

    started, ended = seen[0], seen[-1]
    assert (started.event, started.runner) == ("started", "podman")
    assert started.container_id == (_run_dir(runner, "exits") / CIDFILE).read_text().strip()
    assert (ended.event, ended.runner, ended.exit_reason, ended.exit_code) == (
        "failed",
        "podman",
        "failed",
        3,
    )
    assert "to-stdout" in _log(runner, "exits")
    assert "to-stderr" in _log(runner, "exits")
    assert _containers("exits") == []  # removed once its end was recorded


def test_a_container_sees_its_gpus_and_dirs_and_carries_its_labels(
    runner_of: Callable[[], PodmanRunner],
) -> None:
    runner = runner_of()
    script = (
        'echo "cuda=$CUDA_VISIBLE_DEVICES nvidia=$NVIDIA_VISIBLE_DEVICES"; '
        'echo made > "$GPUCLOUD_OUTPUT_DIR/f"; '
        'trap "exit 0" TERM; echo ready; while true; do sleep 0.1; done'
    )
    _start(runner, "binds", script, gpus=(GPU_B, GPU_A))
    _until(runner, _started("binds"))
    deadline = time.monotonic() + 10
    while "ready" not in _log(runner, "binds") and time.monotonic() < deadline:
        time.sleep(0.05)

    listed = _containers("binds")
    assert len(listed) == 1
    labels = listed[0]["Labels"]
    assert isinstance(labels, dict)
    assert labels["gpucloud.tenant"] == "acme"
    assert labels["gpucloud.placement"] == "pl-binds"
    assert f"cuda={GPU_B},{GPU_A} nvidia={GPU_B},{GPU_A}" in _log(runner, "binds")
    assert (_run_dir(runner, "binds") / files.OUTPUT_DIR / "f").read_text() == "made\n"

    assert runner.stop(workload_id="binds", reason="cancelled")
    ended = _until(runner, _ended("binds"))[-1]
    assert (ended.exit_reason, ended.exit_code, ended.signal) == ("cancelled", 0, None)


def test_a_stop_sends_sigterm_then_sigkill_after_the_grace(runner_of: Callable[[], PodmanRunner]) -> None:
    runner = runner_of()
    _start(
        runner, "stubborn", 'trap "echo got-term" TERM; echo ready; while true; do sleep 0.1; done', grace_s=1
    )
    _until(runner, _started("stubborn"))
    deadline = time.monotonic() + 10
    while "ready" not in _log(runner, "stubborn") and time.monotonic() < deadline:
        time.sleep(0.05)

    assert runner.stop(workload_id="stubborn", reason="preempted")
    ended = _until(runner, _ended("stubborn"))[-1]

    assert (ended.exit_reason, ended.signal) == ("preempted", 9)
    assert "killed by SIGKILL after SIGTERM and the grace" in ended.reason
    assert "got-term" in _log(runner, "stubborn")  # the TERM reached the container first


def test_a_container_over_its_memory_limit_is_killed(runner_of: Callable[[], PodmanRunner]) -> None:
    runner = runner_of()
    _start(runner, "hungry", 'x="$(yes | head -c 200000000)"; echo survived', memory_bytes=32 << 20)

    ended = _until(runner, _ended("hungry"))[-1]

    assert ended.signal == 9, ended  # the limit holds: the kernel's OOM killer ended it
    assert "survived" not in _log(runner, "hungry")
    if ended.exit_reason != "oom_killed":
        pytest.skip(
            "podman here does not report OOMKilled (conmon on a cgroup v1 host): only the kill is seen"
        )


def test_a_new_runner_adopts_a_running_container_without_starting_it_again(
    runner_of: Callable[[], PodmanRunner],
) -> None:
    first = runner_of()
    _start(first, "adopted", 'trap "exit 7" TERM; while true; do sleep 0.1; done')
    _until(first, _started("adopted"))

    second = runner_of()  # the agent restarted
    _start(second, "adopted", 'trap "exit 7" TERM; while true; do sleep 0.1; done')  # the replayed placement
    assert second.poll(now=NOW) == []  # neither started again nor told again
    assert len(_containers("adopted")) == 1

    assert second.stop(workload_id="adopted", reason="cancelled")
    ended = _until(second, _ended("adopted"))[-1]
    assert (ended.exit_reason, ended.exit_code, ended.runner) == ("cancelled", 7, "podman")


def test_an_image_podman_cannot_use_fails_without_a_start(runner_of: Callable[[], PodmanRunner]) -> None:
    runner = runner_of()
    _start(runner, "badimage", "true", image="localhost/Not A Valid Reference")

    seen = _until(runner, _ended("badimage"))

    assert [r.event for r in seen] == ["failed"]
    assert seen[0].exit_code == 125
    assert "podman could not run the container" in seen[0].reason
    with contextlib.suppress(FileNotFoundError):
        assert (_run_dir(runner, "badimage") / CIDFILE).read_text() == ""
