"""What the podman runner asks podman for: CDI devices, labels, limits, mounts, entrypoint, environment."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

from libs.common.events.scheduler import AllocationItem, RunSpec
from services.telemetry.adapters.runner.binding import bind
from services.telemetry.adapters.runner.podman import (
    ENV_FILE,
    NO_GPUS_NOTE,
    container_env,
    container_spec,
    run_argv,
)
from services.telemetry.adapters.runner.podman_supervise import CIDFILE, container_status
from services.telemetry.adapters.runner.runs import Launch, spec_doc

RUN_DIR = Path("/srv/runs/agent/w1-0123456789abcdef")
GPU = "GPU-11111111-1111-1111-1111-111111111111"
MIG = "MIG-22222222-2222-2222-2222-222222222222"


def _argv(run: RunSpec, **kw: Any) -> list[str]:
    options: dict[str, Any] = {
        "podman": ["podman", "--root", "/srv/containers"],
        "run_args": [],
        "name": "gpucloud-w1",
        "run": run,
        "run_dir": RUN_DIR,
        "env_file": RUN_DIR / ENV_FILE,
        "inherit": [],
        "devices": [],
        "labels": {},
    }
    return run_argv(**(options | kw))


def _pairs(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == flag]


def test_each_gpu_and_mig_instance_is_a_cdi_device_by_its_uuid_in_allocation_order() -> None:
    argv = _argv(RunSpec(image="img:1"), devices=[MIG, GPU])
    assert _pairs(argv, "--device") == [f"nvidia.com/gpu={MIG}", f"nvidia.com/gpu={GPU}"]


def test_labels_limits_and_same_path_mounts_are_asked_for() -> None:
    run = RunSpec(image="img:1", memory_bytes=1 << 30, cpu_millis=1500, working_dir="/work")
    labels = {"gpucloud.workload": "w1", "gpucloud.tenant": "acme", "gpucloud.placement": "p1"}
    argv = _argv(run, labels=labels)
    assert argv[:4] == ["podman", "--root", "/srv/containers", "run"]
    assert _pairs(argv, "--label") == [
        "gpucloud.workload=w1",
        "gpucloud.tenant=acme",
        "gpucloud.placement=p1",
    ]
    assert _pairs(argv, "--memory") == [str(1 << 30)]
    assert _pairs(argv, "--memory-swap") == [str(1 << 30)]
    assert _pairs(argv, "--cpus") == ["1.5"]
    assert _pairs(argv, "--workdir") == ["/work"]
    assert _pairs(argv, "--mount") == [
        f"type=bind,source={RUN_DIR / d},destination={RUN_DIR / d}" for d in ("outputs", "checkpoints", "tmp")
    ]
    assert _pairs(argv, "--cidfile") == [str(RUN_DIR / CIDFILE)]
    assert _pairs(argv, "--env-file") == [str(RUN_DIR / ENV_FILE)]
    assert "--rm" not in argv
    assert "--detach" not in argv


def test_without_limits_no_limit_flags_are_passed() -> None:
    argv = _argv(RunSpec(image="img:1"))
    assert not {"--memory", "--memory-swap", "--cpus", "--workdir", "--device"} & set(argv)


def test_command_replaces_the_entrypoint_and_args_follow_the_image() -> None:
    argv = _argv(RunSpec(image="img:1", command=["python", "-m"], args=["train", "--x"]))
    assert _pairs(argv, "--entrypoint") == ['["python", "-m"]']
    assert argv[-3:] == ["img:1", "train", "--x"]


def test_without_a_command_the_image_entrypoint_gets_the_args() -> None:
    argv = _argv(RunSpec(image="img:1", args=["serve"]), run_args=["--runtime", "runc"])
    assert "--entrypoint" not in argv
    assert argv[-4:] == ["--runtime", "runc", "img:1", "serve"]


def test_the_container_keeps_the_platform_env_and_not_the_hosts_path_or_home() -> None:
    env = {"PATH": "/host/bin", "HOME": "/run", "LANG": "C", "CUDA_VISIBLE_DEVICES": GPU, "X": "1"}
    assert container_env(env, run_env={"X": "1"}) == {"CUDA_VISIBLE_DEVICES": GPU, "X": "1"}
    assert container_env(env, run_env={"PATH": "/host/bin"})["PATH"] == "/host/bin"  # the spec set it


def _spec(run: RunSpec, *, cdi: bool = True, **kw: Any) -> tuple[dict[str, Any], dict[str, str] | None]:
    items = [AllocationItem(gpu_uuid=GPU, units=Decimal(8), model="H100")]
    launch = Launch("w1", "acme", "p1", tuple(items), run)
    binding = bind(
        workload_id="w1",
        tenant_id="acme",
        allocations=items,
        card_memory={},
        run_env=run.env,
        base_env={"PATH": "/usr/bin", "HOME": "/root", "SECRET_OF_AGENT": "x"},
        run_dir=RUN_DIR,
        mps_dir=None,
    )
    doc = spec_doc(launch, env=binding.env, notes=(), log_quota_bytes=1 << 20, cgroup_root=None)
    return container_spec(
        doc,
        launch=launch,
        path=RUN_DIR,
        devices=binding.devices,
        podman=["podman"],
        run_args=[],
        cdi=cdi,
        environ={"PATH": "/usr/bin", "HOME": "/root", "SECRET_OF_AGENT": "x"},
    )


def test_the_spec_runs_podman_with_its_own_env_and_the_workloads_in_the_env_file() -> None:
    spec, env_file = _spec(RunSpec(image="img:1", command=["sh"], env={"TOKEN": "t", "MULTI": "a\nb"}))
    assert spec["runner"] == "podman"
    assert spec["argv"][:2] == ["podman", "run"]
    assert spec["container"]["name"] == f"gpucloud-{RUN_DIR.name}"
    assert spec["env"] == {
        "PATH": "/usr/bin",
        "HOME": "/root",
        "MULTI": "a\nb",
    }  # podman's, no secret of ours
    assert env_file is not None
    assert env_file["TOKEN"] == "t"
    assert env_file["GPUCLOUD_OUTPUT_DIR"] == str(RUN_DIR / "outputs")
    assert env_file["CUDA_VISIBLE_DEVICES"] == GPU
    assert env_file["NVIDIA_VISIBLE_DEVICES"] == GPU
    assert "MULTI" not in env_file
    assert _pairs(spec["argv"], "--env") == ["MULTI"]
    assert _pairs(spec["argv"], "--device") == [f"nvidia.com/gpu={GPU}"]


def test_a_simulated_fleet_passes_no_devices_and_says_so() -> None:
    spec, _ = _spec(RunSpec(image="img:1"), cdi=False)
    assert "--device" not in spec["argv"]
    assert NO_GPUS_NOTE in spec["notes"]


def test_a_spec_without_an_image_is_left_for_the_refusal() -> None:
    spec, env_file = _spec(RunSpec(command=["true"]))
    assert env_file is None
    assert spec["runner"] == "podman"
    assert "container" not in spec


def test_a_container_exit_code_above_128_is_the_signal_that_ended_it() -> None:
    assert container_status(137) == (None, 9)
    assert container_status(143) == (None, 15)
    assert container_status(3) == (3, None)
    assert container_status(0) == (0, None)
    assert container_status(255) == (255, None)
    assert container_status(None) == (None, None)
