"""What a workload sees of its GPUs and of the platform: the environment the process runner gives it.

As Slurm and NVIDIA's device plugin do it: CUDA_VISIBLE_DEVICES names exactly the assigned GPUs (or
MIG devices) by UUID, so CUDA's device 0 is the first of them whatever the host's numbering, and a
process cannot open the others through CUDA. A time-sliced share is a whole GPU's UUID shared with
other workloads: with an MPS control daemon running, CUDA_MPS_ACTIVE_THREAD_PERCENTAGE and
CUDA_MPS_PINNED_DEVICE_MEM_LIMIT hold it to its part; without one nothing fences its memory off.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from libs.common.events.scheduler import AllocationItem

__all__ = [
    "BASE_ENV",
    "DEFAULT_MPS_PIPE_DIR",
    "Binding",
    "bind",
    "mps_pipe_dir",
    "share_fraction",
]

DEFAULT_MPS_PIPE_DIR = Path("/tmp/nvidia-mps")  # noqa: S108 - the MPS daemon's own default, not ours
#: What a workload inherits from the agent's environment (nothing else: no credentials leak through).
BASE_ENV = ("PATH", "LANG", "LC_ALL", "TZ")
_SHARE_OF = re.compile(r"-of-(\d+)$")  # inventory's time-slice share ids: <gpu>/ts/<i>-of-<ratio>
_MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Binding:
    """The workload's environment, the devices it names, and what it should be told it lacks."""

    env: dict[str, str]
    devices: tuple[str, ...]
    notes: tuple[str, ...] = ()


def mps_pipe_dir(environ: Mapping[str, str]) -> Path | None:
    """Where a running MPS control daemon listens (its control pipe exists there), or None."""
    directory = Path(environ.get("CUDA_MPS_PIPE_DIRECTORY") or DEFAULT_MPS_PIPE_DIR)
    return directory if (directory / "control").exists() else None


def share_fraction(item: AllocationItem, *, card_bytes: int | None) -> float | None:
    """The part of its GPU a time-sliced share is (1/ratio); None for a whole GPU or a MIG instance."""
    if item.memory_isolated is not False:
        return None
    if item.memory_bytes and card_bytes:
        return min(item.memory_bytes / card_bytes, 1.0)
    match = _SHARE_OF.search(item.partition_id or "")
    return 1 / int(match.group(1)) if match and int(match.group(1)) > 0 else None


def bind(
    *,
    workload_id: str,
    tenant_id: str,
    allocations: Sequence[AllocationItem],
    card_memory: Mapping[str, int],
    run_env: Mapping[str, str],
    base_env: Mapping[str, str],
    run_dir: Path,
    mps_dir: Path | None,
    restore_from: Path | None = None,
) -> Binding:
    """The environment of one workload: base, then its spec's env, then the platform's (which wins).

    ``restore_from``: the checkpoint a migrated workload starts from (GPUCLOUD_RESTORE_FROM); never
    inherited from anything else."""
    devices, notes = _devices(allocations)
    env = {k: base_env[k] for k in BASE_ENV if k in base_env}
    env.setdefault("PATH", os.defpath)
    env.update({"HOME": str(run_dir), "TMPDIR": str(run_dir / "tmp")})
    env.update(run_env)
    env.update(
        {
            "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
            "CUDA_VISIBLE_DEVICES": ",".join(devices),
            "NVIDIA_VISIBLE_DEVICES": ",".join(devices) if devices else "void",
            "GPUCLOUD_WORKLOAD_ID": workload_id,
            "GPUCLOUD_TENANT_ID": tenant_id,
            "GPUCLOUD_OUTPUT_DIR": str(run_dir / "outputs"),
            "GPUCLOUD_CHECKPOINT_DIR": str(run_dir / "checkpoints"),
        }
    )
    env.pop("GPUCLOUD_RESTORE_FROM", None)
    if restore_from is not None:
        env["GPUCLOUD_RESTORE_FROM"] = str(restore_from)
    shares = [
        (i, f)
        for i, a in enumerate(allocations)
        if (f := share_fraction(a, card_bytes=card_memory.get(a.gpu_uuid))) is not None
    ]
    if shares:
        notes += _share_limits(env, shares=shares, allocations=allocations, devices=devices, mps_dir=mps_dir)
    return Binding(env=env, devices=devices, notes=notes)


def _devices(allocations: Sequence[AllocationItem]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The UUIDs to make visible, in allocation order, once each; a MIG instance by its own UUID."""
    devices: list[str] = []
    notes: list[str] = []
    for a in allocations:
        device = a.gpu_uuid
        part = a.partition_id or ""
        if part.startswith("MIG-"):
            device = part
        elif a.memory_isolated is not False and part and "/mig/" in part:
            notes.append(
                f"MIG instance {part} has no MIG device UUID on this host: all of {a.gpu_uuid} is visible"
            )
        if device not in devices:
            devices.append(device)
    return tuple(devices), tuple(notes)


def _share_limits(
    env: dict[str, str],
    *,
    shares: Sequence[tuple[int, float]],
    allocations: Sequence[AllocationItem],
    devices: Sequence[str],
    mps_dir: Path | None,
) -> tuple[str, ...]:
    if mps_dir is None:
        return ("memory not isolated: a time-sliced share without an MPS control daemon on this host",)
    env["CUDA_MPS_PIPE_DIRECTORY"] = str(mps_dir)
    env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(max(1, int(min(f for _, f in shares) * 100)))
    limits = [
        f"{devices.index(a.gpu_uuid)}={a.memory_bytes // _MIB}M"
        for a in (allocations[i] for i, _ in shares)
        if a.memory_bytes
    ]
    if limits:
        env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = ",".join(limits)
    return ()
