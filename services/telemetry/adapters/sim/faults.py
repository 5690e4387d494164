"""Fault injection for simulated GPUs: on command, or at a random rate."""

from __future__ import annotations

import random
from enum import StrEnum

from services.telemetry.adapters.sim.gpu import SimGpu

__all__ = [
    "DEFAULT_LEAK_PCT_PER_MIN",
    "SIMULATED_XIDS",
    "WORKLOAD_FATAL_XIDS",
    "FaultKind",
    "apply_fault",
    "clear_faults",
    "random_fault",
]

SIMULATED_XIDS = (13, 31, 43, 48, 63, 64, 74, 79, 94, 95, 119)
# XIDs after which the processes on that GPU are gone (application fault, reset channel, uncorrectable ECC,
# GPU lost, GSP timeout). 63/64/74 are recorded but the job survives.
WORKLOAD_FATAL_XIDS = frozenset({13, 31, 43, 48, 79, 94, 95, 119})
#: How fast an injected leak grows unless the request says, in % of the card's memory per simulated
#: minute: a leak creeps, so from 90% to the OOM at 100% takes 8 minutes and the shipped "memory above
#: 90% for 5 minutes" rule (GpuMemoryHigh) pages before the job dies.
DEFAULT_LEAK_PCT_PER_MIN = 1.25
RUNAWAY_COOLING = 0.35  # fans or coolant failing: three times the rise at the same power
POWER_CAP_FRACTION = 0.5


class FaultKind(StrEnum):
    """The faults the simulator can inject."""

    XID = "xid"
    ECC_BURST = "ecc_burst"
    THERMAL_RUNAWAY = "thermal_runaway"
    POWER_CAP = "power_cap"
    PCIE_SATURATION = "pcie_saturation"
    MEMORY_LEAK = "memory_leak"
    FALL_OFF_BUS = "fall_off_bus"


def apply_fault(
    gpu: SimGpu,
    *,
    fault: FaultKind,
    xid: int | None = None,
    leak_pct_per_min: float | None = None,
    survives_reset: bool = False,
) -> None:
    """Change the GPU's state as the fault would; raised XIDs go to gpu.raised_xids.

    ``leak_pct_per_min``: a memory leak's growth (default DEFAULT_LEAK_PCT_PER_MIN); other faults ignore it.
    ``survives_reset``: a reset or reboot leaves the GPU as it is (clear_faults does nothing).
    """
    gpu.survives_reset = gpu.survives_reset or survives_reset
    if fault is FaultKind.XID:
        _apply_xid(gpu, xid=79 if xid is None else xid)
    elif fault is FaultKind.ECC_BURST:
        gpu.ecc_sbe += gpu.rng.randint(50, 500)
        if gpu.rng.random() < 0.2:
            _apply_xid(gpu, xid=48)  # a burst that also flips two bits in one word
    elif fault is FaultKind.THERMAL_RUNAWAY:
        gpu.cooling = RUNAWAY_COOLING
    elif fault is FaultKind.POWER_CAP:
        gpu.power_cap_w = POWER_CAP_FRACTION * gpu.spec.power_limit_w
    elif fault is FaultKind.PCIE_SATURATION:
        gpu.pcie_saturated = True
    elif fault is FaultKind.MEMORY_LEAK:
        pct = DEFAULT_LEAK_PCT_PER_MIN if leak_pct_per_min is None else leak_pct_per_min
        gpu.leak_bytes_per_s = pct / 100.0 / 60.0 * gpu.spec.memory_bytes
    elif fault is FaultKind.FALL_OFF_BUS:
        _apply_xid(gpu, xid=79)


def _apply_xid(gpu: SimGpu, *, xid: int) -> None:
    gpu.raised_xids.append(xid)
    if xid in (48, 95):
        gpu.ecc_dbe += 1
    elif xid in (63, 64, 94):
        gpu.ecc_sbe += 1
    if xid == 79:
        gpu.lost = "GPU has fallen off the bus (XID 79)"


def clear_faults(gpu: SimGpu) -> bool:
    """Undo every injected condition, as a node reset would (ECC counters are volatile, so they clear);
    False, changing nothing, when a fault injected to survive the reset holds the GPU."""
    if gpu.survives_reset:
        return False
    gpu.lost, gpu.power_cap_w, gpu.cooling, gpu.pcie_saturated = None, None, 1.0, False
    gpu.leak_bytes_per_s, gpu.leaked, gpu.ecc_sbe, gpu.ecc_dbe = 0.0, 0.0, 0, 0
    return True


def random_fault(rng: random.Random) -> tuple[FaultKind, int | None]:
    """Pick a fault for rate-based injection; XIDs are the most common kind."""
    fault = rng.choice((FaultKind.XID, FaultKind.XID, FaultKind.ECC_BURST, *FaultKind))
    return fault, rng.choice(SIMULATED_XIDS) if fault is FaultKind.XID else None
