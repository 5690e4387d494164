"""GPU model facts telemetry needs (simulation and hints), as plain data.

Services never import each other, so this is telemetry's own small copy of the catalog; inventory owns
the real one. Figures are the public datasheet values (SXM/PCIe variant as named), rounded.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GPU_MODELS", "GpuModelSpec", "model_for_name"]

GIB = 1024**3


@dataclass(frozen=True, slots=True)
class GpuModelSpec:
    """Static facts about one GPU model."""

    name: str
    memory_bytes: int
    power_limit_w: float
    idle_power_w: float
    max_sm_clock_mhz: int
    idle_sm_clock_mhz: int
    mem_clock_mhz: int
    pcie_bytes_per_s: int  # one direction, the practical ceiling of the host link
    tensor_cores: bool
    mig_capable: bool
    slowdown_temp_c: float  # where hardware thermal slowdown starts


GPU_MODELS: dict[str, GpuModelSpec] = {
    spec.name: spec
    for spec in (
        GpuModelSpec("H200", 141 * GIB, 700, 90, 1980, 345, 3201, 50 * 10**9, True, True, 87),
        GpuModelSpec("H100", 80 * GIB, 700, 80, 1980, 345, 2619, 50 * 10**9, True, True, 87),
        GpuModelSpec("A100-80GB", 80 * GIB, 400, 55, 1410, 210, 1593, 25 * 10**9, True, True, 85),
        GpuModelSpec("A100-40GB", 40 * GIB, 400, 50, 1410, 210, 1215, 25 * 10**9, True, True, 85),
        GpuModelSpec("L40S", 48 * GIB, 350, 35, 2520, 210, 9001, 25 * 10**9, True, False, 88),
        GpuModelSpec("L4", 24 * GIB, 72, 16, 2040, 210, 6251, 12 * 10**9, True, False, 88),
        GpuModelSpec("T4", 16 * GIB, 70, 10, 1590, 300, 5001, 12 * 10**9, True, False, 85),
        GpuModelSpec("V100", 32 * GIB, 300, 40, 1530, 135, 877, 12 * 10**9, True, False, 85),
        GpuModelSpec("P100", 16 * GIB, 250, 30, 1480, 405, 715, 12 * 10**9, False, False, 85),
    )
}


def model_for_name(name: str) -> GpuModelSpec | None:
    """Find the spec for an NVML product name such as 'NVIDIA H200' or 'NVIDIA A100-SXM4-80GB'."""
    upper = name.upper().replace("NVIDIA", "").strip()
    if upper in GPU_MODELS:
        return GPU_MODELS[upper]
    # Longest key first so "A100-80GB" wins over a bare "A100" style match.
    for key in sorted(GPU_MODELS, key=len, reverse=True):
        family, _, size = key.partition("-")
        if family in upper and (not size or size in upper):
            return GPU_MODELS[key]
    return None
