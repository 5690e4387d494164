"""Pure models of how a simulated GPU behaves: workload load profiles, first-order lags, power and heat."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "AMBIENT_C",
    "IDLE",
    "PROFILES",
    "Load",
    "LoadProfile",
    "ProfileKind",
    "lag",
    "power_draw_w",
    "profile_load",
    "steady_temp_c",
]

AMBIENT_C = 30.0
# Degrees above ambient at the full power limit with healthy cooling (datacentre GPUs settle ~70-78 °C).
FULL_POWER_RISE_C = 45.0


class ProfileKind(StrEnum):
    """How a workload uses its GPU."""

    TRAINING = "training"
    INFERENCE = "inference"
    INTERACTIVE = "interactive"


@dataclass(frozen=True, slots=True)
class LoadProfile:
    """Typical demand of a workload kind."""

    sm_pct: float  # mean SM utilisation while running
    sm_jitter: float  # standard deviation of the per-second noise
    mem_util_pct: float
    memory_fraction: float  # share of framebuffer the job plateaus at
    memory_tau_s: float  # how fast memory grows toward the plateau
    pcie_rx_fraction: float  # share of the host link used for input
    startup_delay_s: float  # container start, imports, data loader warm-up
    # Share of the SM-busy time spent in tensor-core kernels: mixed-precision GEMMs and attention
    # dominate training, inference adds more memory-bound kernels, notebooks are mostly elementwise.
    tensor_share: float = 0.0


PROFILES: dict[ProfileKind, LoadProfile] = {
    ProfileKind.TRAINING: LoadProfile(92.0, 4.0, 55.0, 0.78, 60.0, 0.04, 45.0, 0.5),
    ProfileKind.INFERENCE: LoadProfile(50.0, 15.0, 30.0, 0.45, 10.0, 0.02, 20.0, 0.35),
    ProfileKind.INTERACTIVE: LoadProfile(12.0, 20.0, 8.0, 0.25, 30.0, 0.005, 5.0, 0.1),
}


@dataclass(frozen=True, slots=True)
class Load:
    """The demand a set of workloads puts on one GPU at one instant."""

    sm_pct: float
    mem_util_pct: float
    pcie_rx_fraction: float
    memory_fraction: float
    memory_tau_s: float = 30.0
    tensor_share: float = 0.0  # of the SM activity, on GPUs with tensor cores (LoadProfile.tensor_share)


IDLE = Load(0.0, 0.0, 0.0, 0.0)


def profile_load(*, kind: ProfileKind, rng: random.Random) -> Load:
    """One second of demand from one running workload, with noise."""
    p = PROFILES[kind]
    sm = rng.gauss(p.sm_pct, p.sm_jitter)
    if kind is ProfileKind.INTERACTIVE and rng.random() < 0.1:
        sm = 85.0  # a notebook cell runs: short bursts on an otherwise idle GPU
    sm = min(max(sm, 0.0), 100.0)
    mem_util = min(p.mem_util_pct * sm / max(p.sm_pct, 1.0), 100.0)
    return Load(sm, mem_util, p.pcie_rx_fraction, p.memory_fraction, p.memory_tau_s, p.tensor_share)


def lag(*, current: float, target: float, dt_s: float, tau_s: float) -> float:
    """First-order lag: move toward target by 1 - e^(-dt/tau) of the gap."""
    if dt_s <= 0:
        return current
    return current + (target - current) * (1.0 - math.exp(-dt_s / tau_s))


def power_draw_w(*, sm_pct: float, mem_util_pct: float, idle_w: float, limit_w: float) -> float:
    """Power grows roughly linearly with SM activity, a little with memory traffic."""
    busy = 0.85 * sm_pct / 100.0 + 0.15 * mem_util_pct / 100.0
    return idle_w + (limit_w - idle_w) * min(busy, 1.0)


def steady_temp_c(*, power_w: float, limit_w: float, cooling: float) -> float:
    """The temperature the die settles at for a power draw; cooling < 1 means failing fans/flow."""
    return AMBIENT_C + FULL_POWER_RISE_C * (power_w / limit_w) / max(cooling, 0.05)
