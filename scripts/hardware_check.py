"""The process runner and the NVML reader on a real NVIDIA GPU, in about a minute (docs/hardware/README.md).

Run through ``scripts/hardware-check.sh`` (or ``python -m scripts.hardware_check``). It prints the GPUs, the
driver and CUDA versions, then starts the process runner itself (no broker, no services) pinned to the
first GPU by UUID, running a workload that prints its ``CUDA_VISIBLE_DEVICES`` and ``nvidia-smi -L`` and
loads the GPU for ``--seconds`` (a bf16 matmul loop with torch or cupy where the workload's Python has one,
else an ``nvidia-smi --query-gpu`` loop). While it runs, the project's NVML reader samples every second;
each reading is printed and compared with the simulator's ranges for that model, and readings outside
them are flagged. Then the device adapter (services/telemetry/adapters/devices/nvidia_smi.py) lists the
GPU's MIG profiles; where MIG mode is already on and the GPU has no instances, it creates one instance of
the smallest profile and destroys it again (MIG mode itself is never toggled: that may need a reboot).
Everything printed also goes to ``docs/hardware/<date>-<gpu model>.txt``.

Exit status: 0 when the workload ran on its GPU and succeeded, 1 when it did not, 2 without an NVIDIA GPU.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the project is imported only once a GPU is known to be here (a fast exit 2 without)
    from services.telemetry.adapters.runner.process import ProcessRunner
    from services.telemetry.domain.devices import DeviceResult
    from services.telemetry.domain.gpu_models import GpuModelSpec
    from services.telemetry.domain.metrics import GpuSample
    from services.telemetry.domain.probe import GpuProbe
    from services.telemetry.service.agent.ports import DeviceActions

__all__ = [
    "NO_GPU",
    "Log",
    "Ranges",
    "check",
    "main",
    "mig_check",
    "no_gpu_reason",
    "out_of_range",
    "sim_ranges",
]

ROOT = Path(__file__).resolve().parents[1]
NO_GPU = 2
WORKLOAD_ID = "hardware-check"
#: The workload: its view of the GPUs, then load on its one GPU for HWCHECK_SECONDS.
WORKLOAD = r"""
import os, subprocess, sys, time
secs = float(os.environ["HWCHECK_SECONDS"])
print("CUDA_VISIBLE_DEVICES=" + os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>"), flush=True)
print("nvidia-smi -L in the workload:", flush=True)
print(subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout, end="", flush=True)
def loop(step, sync, flop):
    end, last, done = time.monotonic() + secs, time.monotonic(), 0
    while time.monotonic() < end:
        step(); done += 1
        if time.monotonic() - last >= 1.0:
            sync(); now = time.monotonic()
            print(f"{done} matmuls, {flop * done / (now - last) / 1e12:.0f} TFLOP/s", flush=True)
            last, done = now, 0
try:
    import torch
    print(f"torch {torch.__version__}: {torch.cuda.device_count()} device(s) visible, "
          f"cuda:0 = {torch.cuda.get_device_name(0)}", flush=True)
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    loop(lambda: a @ a, torch.cuda.synchronize, 2 * 8192**3)
    sys.exit(0)
except ImportError:
    pass
try:
    import cupy
    print(f"cupy {cupy.__version__}: {cupy.cuda.runtime.getDeviceCount()} device(s) visible", flush=True)
    a = cupy.random.random((8192, 8192), dtype=cupy.float32)
    loop(lambda: a @ a, cupy.cuda.Device().synchronize, 2 * 8192**3)
    sys.exit(0)
except ImportError:
    print("no torch or cupy in this Python: an nvidia-smi --query-gpu loop instead", flush=True)
end = time.monotonic() + secs
query = ["nvidia-smi", "--query-gpu=uuid,utilization.gpu,memory.used", "--format=csv,noheader"]
while time.monotonic() < end:
    print(subprocess.run(query, capture_output=True, text=True).stdout.strip(), flush=True)
    time.sleep(1)
"""


def no_gpu_reason() -> str | None:
    """Why this host cannot run the check (no nvidia-smi, or it lists no GPU); None when it can."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return "nvidia-smi not found on PATH: no NVIDIA driver here"
    try:
        listed = subprocess.run(  # noqa: S603 - nvidia-smi by the absolute path found on PATH
            [smi, "-L"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"nvidia-smi -L failed: {exc}"
    if listed.returncode != 0 or "GPU " not in listed.stdout:
        return f"nvidia-smi -L lists no GPU (exit {listed.returncode}): {listed.stderr.strip()[:200]}"
    return None


#: A metric's range in the simulator: (low, high), either None for unbounded.
Ranges = dict[str, tuple[float | None, float | None]]


def sim_ranges(spec: GpuModelSpec) -> Ranges:
    """What the simulator (services/telemetry/adapters/sim/gpu.py) can report for this model, healthy."""
    from services.telemetry.adapters.sim.physics import AMBIENT_C, FULL_POWER_RISE_C

    hottest = AMBIENT_C + FULL_POWER_RISE_C
    return {
        "sm_util_pct": (0.0, 100.0),
        "mem_util_pct": (0.0, 100.0),
        "tensor_active_pct": (0.0, 100.0),
        "fb_used_bytes": (0.0, float(spec.memory_bytes)),
        "fb_total_bytes": (0.95 * spec.memory_bytes, 1.05 * spec.memory_bytes),
        "pcie_rx_bytes_per_s": (0.0, float(spec.pcie_bytes_per_s)),
        "pcie_tx_bytes_per_s": (0.0, float(spec.pcie_bytes_per_s)),
        "gpu_temp_c": (AMBIENT_C, hottest),
        "mem_temp_c": (AMBIENT_C, hottest + 6.0),
        "power_w": (spec.idle_power_w, spec.power_limit_w),
        "power_limit_w": (spec.power_limit_w, spec.power_limit_w),
        "sm_clock_mhz": (float(spec.idle_sm_clock_mhz), float(spec.max_sm_clock_mhz)),
        "mem_clock_mhz": (float(spec.mem_clock_mhz), float(spec.mem_clock_mhz)),
    }


def out_of_range(sample: GpuSample, ranges: Ranges) -> list[str]:
    """One line per reading outside the simulator's range (readings NVML could not take are skipped)."""
    flags = []
    for name, (low, high) in ranges.items():
        value = getattr(sample, name)
        if value is None:
            continue
        if (low is not None and value < low) or (high is not None and value > high):
            flags.append(f"{name}={value:g} outside the simulator's [{low:g}, {high:g}]")
    return flags


@dataclass
class Log:
    """Every line printed, kept for the file."""

    lines: list[str] = field(default_factory=list)

    def __call__(self, line: str = "") -> None:
        print(line, flush=True)
        self.lines.append(line)


def _smi(*args: str) -> str:
    smi = shutil.which("nvidia-smi") or "nvidia-smi"
    done = subprocess.run(  # noqa: S603 - nvidia-smi by the absolute path found on PATH, fixed arguments
        [smi, *args], capture_output=True, text=True, timeout=30, check=False
    )
    return (done.stdout or done.stderr).rstrip()


def _versions(say: Log) -> None:
    say("$ nvidia-smi -L")
    say(_smi("-L"))
    say("$ nvidia-smi --query-gpu=index,uuid,name,driver_version,memory.total,power.limit --format=csv")
    say(_smi("--query-gpu=index,uuid,name,driver_version,memory.total,power.limit", "--format=csv"))
    cuda = re.search(r"CUDA Version:\s*([\d.]+)", _smi())
    say(f"CUDA version (driver): {cuda.group(1) if cuda else 'not shown by nvidia-smi'}")


def _workload_python() -> str:
    """This Python, or the first python3 on PATH that has torch or cupy (the project's venv may not)."""
    probe = "import importlib.util as u; print(any(u.find_spec(m) for m in ('torch', 'cupy')))"
    for candidate in (sys.executable, shutil.which("python3"), shutil.which("python")):
        if candidate is None:
            continue
        found = subprocess.run(  # noqa: S603 - a Python interpreter found on PATH, our own probe
            [candidate, "-c", probe], capture_output=True, text=True, timeout=60, check=False
        )
        if found.stdout.strip() == "True":
            return candidate
    return sys.executable


def _output_of(root: Path) -> str:
    """The workload's output.log (one run directory under the runner's root)."""
    return "\n".join(p.read_text(errors="replace") for p in sorted(root.glob("*/output.log")))


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "gpu"


async def check(*, seconds: float, say: Callable[[str], None], probe: GpuProbe) -> tuple[int, str]:
    """The run itself, reading the GPUs through ``probe``; the exit status and the GPU's model name."""
    from libs.common.events.scheduler import AllocationItem, RunSpec
    from services.telemetry.adapters.runner.process import ProcessRunner
    from services.telemetry.domain.gpu_models import model_for_name

    try:
        gpu = (await probe.discover()).gpus[0]
        spec = model_for_name(gpu.model_name)
        say(
            f"pinned to GPU 0: {gpu.uuid} ({gpu.model_name}); "
            f"simulator model: {spec.name if spec else 'none'}"
        )
        ranges = sim_ranges(spec) if spec is not None else {}
        python = _workload_python()
        say(f"workload Python: {python}")
        with tempfile.TemporaryDirectory(prefix="gpucloud-hwcheck-") as root:
            runner = ProcessRunner(
                root=Path(root), card_memory={gpu.uuid: gpu.memory_bytes or 0}, log_quota_bytes=1 << 20
            )
            item = AllocationItem(gpu_uuid=gpu.uuid, units=Decimal(8), model=spec.name if spec else "unknown")
            run = RunSpec(
                command=[python, "-c", WORKLOAD],
                env={"HWCHECK_SECONDS": f"{seconds:g}"},
                time_limit_s=seconds + 120,
                grace_s=5,
            )
            runner.start(
                workload_id=WORKLOAD_ID,
                tenant_id="hardware-check",
                placement_id="pl-hardware-check",
                gpu_uuids=[gpu.uuid],
                allocations=[item],
                profile="training",
                duration_s=None,
                run=run,
                at=datetime.now(UTC),
            )
            ended = await _follow(
                runner, probe, gpu_uuid=gpu.uuid, ranges=ranges, say=say, limit_s=seconds + 150
            )
            output = _output_of(Path(root))
        say("----- the workload's output.log -----")
        for line in output.rstrip().splitlines():
            say(line)
        say("-------------------------------------")
        pinned = f"CUDA_VISIBLE_DEVICES={gpu.uuid}" in output.splitlines()
        say(f"CUDA_VISIBLE_DEVICES is the pinned GPU's UUID: {'yes' if pinned else 'NO'}")
        say(f"workload ended: {ended or 'not within the limit'}")
        return (0 if pinned and ended == "succeeded" else 1), gpu.model_name
    finally:
        await probe.close()


async def _follow(
    runner: ProcessRunner,
    probe: GpuProbe,
    *,
    gpu_uuid: str,
    ranges: Ranges,
    say: Callable[[str], None],
    limit_s: float,
) -> str | None:
    """Poll the runner and sample NVML every second until the workload's exit; its exit reason."""
    from services.telemetry.domain.metrics import GpuSample

    loop = asyncio.get_running_loop()
    deadline, flagged = loop.time() + limit_s, 0
    while loop.time() < deadline:
        for report in runner.poll(now=datetime.now(UTC)):
            say(
                f"runner: {report.event} pid={report.pid} reason={report.reason!r} notes={list(report.notes)}"
            )
            if report.event in ("finished", "failed"):
                runner.delivered()
                say(f"readings outside the simulator's ranges: {flagged}")
                return report.exit_reason
        runner.delivered()
        for reading in await probe.sample():
            if isinstance(reading, GpuSample) and reading.gpu_uuid == gpu_uuid:
                say(_sample_line(reading))
                for flag in out_of_range(reading, ranges):
                    flagged += 1
                    say(f"  FLAG {flag}")
            elif not isinstance(reading, GpuSample):
                say(f"nvml: {reading.kind} {reading.model_dump(mode='json')}")
        await asyncio.sleep(1.0)
    runner.stop(workload_id=WORKLOAD_ID)
    return None


def _sample_line(s: GpuSample) -> str:
    gib = 1024**3
    used = "-" if s.fb_used_bytes is None else f"{s.fb_used_bytes / gib:.1f}"
    return (
        f"nvml {s.timestamp:%H:%M:%S} sm={s.sm_util_pct}% mem={s.mem_util_pct}% "
        f"tensor={s.tensor_active_pct}% fb={used} GiB "
        f"power={s.power_w}/{s.power_limit_w} W temp={s.gpu_temp_c}/{s.mem_temp_c} C "
        f"clocks={s.sm_clock_mhz}/{s.mem_clock_mhz} MHz pcie rx/tx={s.pcie_rx_bytes_per_s}/"
        f"{s.pcie_tx_bytes_per_s} B/s throttle={s.throttle_reasons}"
    )


async def mig_check(
    *, gpu_uuid: str, mig_mode: str, say: Callable[[str], None], actions: DeviceActions
) -> bool:
    """The MIG profiles the GPU offers; with MIG mode on and no instance on the GPU, one instance of the
    smallest profile created and destroyed. False when a step that ran failed."""
    say(f"----- MIG on {gpu_uuid} (mode: {mig_mode or 'unknown'}) -----")
    listing = await actions.mig_profiles(gpu_uuid=gpu_uuid)
    _say_result(say, listing.result)
    if not listing.result.ok:
        say("no MIG profiles listed" + ("" if mig_mode.lower() == "enabled" else " (MIG mode is not on)"))
        return mig_mode.lower() != "enabled"
    for p in listing.profiles:
        say(f"profile {p.name}: id {p.profile_id}, {p.free}/{p.total} free, {p.memory_gib:g} GiB")
    if mig_mode.lower() != "enabled":
        say("MIG mode is not on: no instance created (the check never toggles it)")
        return True
    now = await actions.mig_instances(gpu_uuid=gpu_uuid)
    if not now.result.ok or now.instances:
        say(f"the GPU has {len(now.instances)} instance(s) or could not list them: left as they are")
        return now.result.ok
    smallest = min(listing.profiles, key=lambda p: (p.memory_gib, p.name))
    say(f"creating one {smallest.name} instance, then destroying it")
    created = await actions.apply_mig(gpu_uuid=gpu_uuid, profiles=[smallest.name])
    _say_result(say, created)
    after = await actions.mig_instances(gpu_uuid=gpu_uuid)
    say(f"instances now: {[(i.profile, i.gpu_instance_id, i.slot) for i in after.instances]}")
    destroyed = await actions.apply_mig(gpu_uuid=gpu_uuid, profiles=[])
    _say_result(say, destroyed)
    return created.ok and destroyed.ok


def _say_result(say: Callable[[str], None], result: DeviceResult) -> None:
    for argv in result.commands:
        say("$ " + " ".join(argv))
    for line in result.output.rstrip().splitlines():
        say(line)
    say(f"-> {result.outcome}{': ' + result.reason if result.reason else ''}")


def main(argv: list[str] | None = None) -> int:
    """Entry point; the process's exit status."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=20.0, help="how long the workload loads the GPU")
    parser.add_argument(
        "--out-dir", type=Path, default=ROOT / "docs" / "hardware", help="where the report goes"
    )
    args = parser.parse_args(argv)
    reason = no_gpu_reason()
    if reason is not None:
        print(f"hardware-check: no NVIDIA GPU here ({reason}); nothing checked", file=sys.stderr)
        return NO_GPU
    if str(ROOT) not in sys.path:  # run as a file: the project is importable from its root
        sys.path.insert(0, str(ROOT))
    from services.telemetry.adapters.nvml_probe import NvmlProbe, NvmlUnavailable

    say = Log()
    say(f"gpucloud hardware check, {datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC")
    _versions(say)
    try:
        status, model = asyncio.run(check(seconds=args.seconds, say=say, probe=NvmlProbe()))
    except NvmlUnavailable as exc:
        print(f"hardware-check: NVML is not usable here ({exc}); nothing checked", file=sys.stderr)
        return NO_GPU
    if not _mig_step(say):
        status = status or 1
    args.out_dir.mkdir(parents=True, exist_ok=True)
    report = args.out_dir / f"{datetime.now(UTC):%Y-%m-%d}-{_slug(model)}.txt"
    report.write_text("\n".join(say.lines) + "\n", encoding="utf-8")
    print(f"written: {report}")
    return status


def _mig_step(say: Log) -> bool:
    """mig_check on GPU 0 through the nvidia-smi adapter."""
    from services.telemetry.adapters.devices import NvidiaSmiActions

    gpu, _, mode = _smi("--query-gpu=uuid,mig.mode.current", "--format=csv,noheader", "-i", "0").partition(
        ","
    )
    smi = shutil.which("nvidia-smi") or "nvidia-smi"
    actions = NvidiaSmiActions(nvidia_smi=(smi,), timeout_s=120)
    return asyncio.run(mig_check(gpu_uuid=gpu.strip(), mig_mode=mode.strip(), say=say, actions=actions))


if __name__ == "__main__":
    sys.exit(main())
