"""scripts/hardware-check.sh without a GPU says so and exits 2; readings outside the simulator's ranges are
flagged."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from scripts.hardware_check import NO_GPU, main, out_of_range, sim_ranges
from services.telemetry.domain.gpu_models import GPU_MODELS
from services.telemetry.domain.metrics import GpuSample

ROOT = Path(__file__).resolve().parents[3]
GIB = 1024**3


def _path_with(tmp_path: Path, nvidia_smi: str | None) -> str:
    """A PATH holding nothing but, if given, a fake nvidia-smi with this body."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if nvidia_smi is not None:
        fake = bin_dir / "nvidia-smi"
        fake.write_text(f"#!/bin/sh\n{nvidia_smi}\n")
        fake.chmod(0o755)
    return str(bin_dir)


def test_without_nvidia_smi_the_check_exits_2_saying_why_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", _path_with(tmp_path, None))
    assert main(["--out-dir", str(tmp_path / "out")]) == NO_GPU
    assert "no NVIDIA GPU here (nvidia-smi not found on PATH" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_an_nvidia_smi_that_lists_no_gpu_is_no_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", _path_with(tmp_path, 'echo "No devices were found"; exit 6'))
    assert main(["--out-dir", str(tmp_path / "out")]) == NO_GPU
    assert "nvidia-smi -L lists no GPU (exit 6)" in capsys.readouterr().err


def test_the_shell_script_exits_2_without_nvidia_smi(tmp_path: Path) -> None:
    done = subprocess.run(
        ["/bin/bash", str(ROOT / "scripts" / "hardware-check.sh")],
        env={"PATH": _path_with(tmp_path, None)},
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )
    assert done.returncode == NO_GPU, done.stderr
    assert "no NVIDIA GPU here" in done.stderr


def _sample(**values: float) -> GpuSample:
    base: dict[str, float] = {
        "sm_util_pct": 97.0,
        "mem_util_pct": 40.0,
        "fb_used_bytes": 3 * GIB,
        "fb_total_bytes": 140.4 * GIB,  # what the driver reports of an H200's 141 GiB
        "gpu_temp_c": 52.0,
        "power_w": 650.0,
        "power_limit_w": 700.0,
        "sm_clock_mhz": 1980,
        "mem_clock_mhz": 3201,
    }
    fields = {k: int(v) if k.endswith(("bytes", "mhz")) else v for k, v in (base | values).items()}
    ids = {"gpu_uuid": "GPU-1", "node": "n", "index": 0, "timestamp": datetime.now(UTC)}
    return GpuSample.model_validate(ids | fields)


def test_readings_inside_the_simulators_ranges_for_the_model_raise_no_flag() -> None:
    assert out_of_range(_sample(), sim_ranges(GPU_MODELS["H200"])) == []


def test_each_reading_outside_the_simulators_ranges_is_flagged_by_name() -> None:
    flags = out_of_range(_sample(power_w=760.0, gpu_temp_c=22.0), sim_ranges(GPU_MODELS["H200"]))
    assert flags == [
        "gpu_temp_c=22 outside the simulator's [30, 75]",
        "power_w=760 outside the simulator's [90, 700]",
    ]
