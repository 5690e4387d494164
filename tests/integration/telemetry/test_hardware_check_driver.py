"""scripts/hardware_check.py's driver without a GPU: the real process runner and supervisor pinned to a
fake probe's first GPU, a fake nvidia-smi on PATH, so what the script does on real hardware is exercised."""

from __future__ import annotations

from pathlib import Path

import pytest

from scripts.hardware_check import Log, check
from services.telemetry.adapters.probe_fake import FakeProbe

pytestmark = pytest.mark.integration

FAKE_SMI = """#!/bin/sh
case "$1" in
  -L) echo "GPU 0: NVIDIA H100 (UUID: GPU-fake-0)"; echo "GPU 1: NVIDIA H100 (UUID: GPU-fake-1)";;
  *) echo "GPU-fake-0, 0 %, 1 MiB";;
esac
"""


async def test_the_driver_runs_the_workload_on_the_first_gpu_and_reads_the_probe_while_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(FAKE_SMI)
    (bin_dir / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    probe, say = FakeProbe(), Log()

    status, model = await check(seconds=1, say=say, probe=probe)

    text = "\n".join(say.lines)
    assert (status, model) == (0, "NVIDIA H100"), text
    assert "CUDA_VISIBLE_DEVICES=GPU-fake-0" in say.lines
    assert "CUDA_VISIBLE_DEVICES is the pinned GPU's UUID: yes" in say.lines
    assert "GPU 1: NVIDIA H100 (UUID: GPU-fake-1)" in text  # nvidia-smi -L from inside the workload
    assert any(line.startswith("runner: started pid=") for line in say.lines)
    assert any(line.startswith("nvml ") and "sm=50.0%" in line for line in say.lines)
    assert "readings outside the simulator's ranges: 0" in say.lines
    assert "workload ended: succeeded" in say.lines
    assert probe.closed
