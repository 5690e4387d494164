"""One simulated GPU: mutable state, a time step driven by its load, and its reading."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime
from math import exp
from typing import Any

from services.telemetry.adapters.sim.physics import AMBIENT_C, FULL_POWER_RISE_C, Load
from services.telemetry.domain.gpu_models import GpuModelSpec
from services.telemetry.domain.metrics import GpuLost, GpuReading, GpuSample

__all__ = ["DRIVER_RESERVED_BYTES", "SimGpu", "SimMigInstance", "combine", "read", "step", "values"]

DRIVER_RESERVED_BYTES = 512 * 1024**2  # CUDA context + driver reservations while anything runs
UTIL_TAU_S = 2.0
TEMP_TAU_S = 30.0
MEM_TEMP_TAU_S = 45.0
SHUTDOWN_MARGIN_C = 15.0  # beyond the slowdown point the board shuts down and drops off the bus
THROTTLE_IDLE, THROTTLE_SW_POWER, THROTTLE_HW_THERMAL = 0x1, 0x4, 0x40


@dataclass(frozen=True, slots=True)
class SimMigInstance:
    """One GPU instance of a simulated MIG layout."""

    profile: str
    gpu_instance_id: int
    slot: int
    uuid: str
    memory_bytes: int


@dataclass(slots=True)
class SimGpu:
    """Mutable state of one simulated GPU (fault flags included)."""

    uuid: str
    node: str
    index: int
    spec: GpuModelSpec
    t: float  # epoch seconds of the last step
    rng: random.Random
    sm: float = 0.0
    tensor: float = 0.0  # tensor-core activity, % (kept at 0 on models without tensor cores)
    mem_util: float = 0.0
    fb_used: float = 0.0
    pcie_rx: float = 0.0
    pcie_tx: float = 0.0
    power: float = 0.0
    temp: float = AMBIENT_C
    mem_temp: float = AMBIENT_C
    sm_clock: int = 0
    throttle: int = THROTTLE_IDLE
    ecc_sbe: int = 0
    ecc_dbe: int = 0
    lost: str | None = None
    power_cap_w: float | None = None
    cooling: float = 1.0
    pcie_saturated: bool = False
    leak_bytes_per_s: float = 0.0
    leaked: float = 0.0
    survives_reset: bool = False  # an injected fault that a reset or reboot does not clear
    mig: tuple[SimMigInstance, ...] | None = None  # the MIG layout once one was applied; None: never
    oom: bool = False  # set by step(), consumed by the fleet
    raised_xids: list[int] = field(default_factory=list)  # consumed by the fleet


def combine(loads: list[Load]) -> Load:
    """Several workloads sharing a GPU add up, saturating at the hardware limits."""
    if len(loads) == 1:
        return loads[0]
    busy = sum(x.sm_pct for x in loads)
    return Load(
        sm_pct=min(busy, 100.0),
        mem_util_pct=min(sum(x.mem_util_pct for x in loads), 100.0),
        pcie_rx_fraction=min(sum(x.pcie_rx_fraction for x in loads), 1.0),
        memory_fraction=sum(x.memory_fraction for x in loads),
        memory_tau_s=min(x.memory_tau_s for x in loads),
        # Each workload's tensor kernels take their share of its own SM time.
        tensor_share=sum(x.sm_pct * x.tensor_share for x in loads) / busy if busy > 0 else 0.0,
    )


def step(gpu: SimGpu, *, t: float, load: Load) -> None:
    """Advance one GPU to time t under a load: lags, power, heat, clocks, leak and faults.

    The first-order lags are physics.lag written out (same formula, one exp per time constant):
    this runs for every GPU every second, and at fleet scale the calls cost more than the maths.
    """
    dt, gpu.t = t - gpu.t, t
    spec = gpu.spec
    util_gain = 1.0 - exp(-dt / UTIL_TAU_S) if dt > 0 else 0.0
    sm_target = load.sm_pct * (0.35 if gpu.pcie_saturated else 1.0)  # starved of input
    gpu.sm = sm = gpu.sm + (sm_target - gpu.sm) * util_gain
    gpu.tensor = sm * load.tensor_share if spec.tensor_cores else 0.0
    gpu.mem_util = mem_util = gpu.mem_util + (load.mem_util_pct - gpu.mem_util) * util_gain
    rx_fraction = 0.97 if gpu.pcie_saturated else load.pcie_rx_fraction
    gpu.pcie_rx = rx_fraction * spec.pcie_bytes_per_s
    gpu.pcie_tx = 0.25 * gpu.pcie_rx

    # Memory: the job's plateau plus anything leaked; an allocation that does not fit is an OOM.
    total = spec.memory_bytes
    reserved = DRIVER_RESERVED_BYTES if load.memory_fraction > 0 else 0
    gpu.leaked += gpu.leak_bytes_per_s * dt
    target = reserved + load.memory_fraction * total + gpu.leaked
    if dt > 0:
        gpu.fb_used += (target - gpu.fb_used) * (1.0 - exp(-dt / load.memory_tau_s))
    if gpu.fb_used >= total:
        # The allocation that does not fit kills the process; its memory is freed with it.
        gpu.oom, gpu.fb_used, gpu.leaked, gpu.leak_bytes_per_s = True, float(reserved), 0.0, 0.0

    # Power and heat.
    limit = spec.power_limit_w if gpu.power_cap_w is None else min(gpu.power_cap_w, spec.power_limit_w)
    # physics.power_draw_w and steady_temp_c, written out (same formulas; a unit test holds them equal).
    busy = 0.85 * sm / 100.0 + 0.15 * mem_util / 100.0
    wanted = spec.idle_power_w + (spec.power_limit_w - spec.idle_power_w) * min(busy, 1.0)
    clock_factor, throttle = 1.0, 0
    if wanted > limit:
        clock_factor, throttle = limit / wanted, THROTTLE_SW_POWER
    gpu.power = min(wanted, limit)
    steady = AMBIENT_C + FULL_POWER_RISE_C * (gpu.power / spec.power_limit_w) / max(gpu.cooling, 0.05)
    if dt > 0:
        gpu.temp += (steady - gpu.temp) * (1.0 - exp(-dt / TEMP_TAU_S))
        gpu.mem_temp += (steady + 6.0 - gpu.mem_temp) * (1.0 - exp(-dt / MEM_TEMP_TAU_S))
    if gpu.temp >= spec.slowdown_temp_c:
        clock_factor, throttle = clock_factor * 0.6, throttle | THROTTLE_HW_THERMAL
    if gpu.temp >= spec.slowdown_temp_c + SHUTDOWN_MARGIN_C:
        gpu.lost = f"thermal shutdown at {gpu.temp:.0f} °C, fell off the bus"
        gpu.raised_xids.append(79)
    if sm < 1.0:
        gpu.sm_clock, gpu.throttle = spec.idle_sm_clock_mhz, throttle | THROTTLE_IDLE
    else:
        gpu.sm_clock, gpu.throttle = int(spec.max_sm_clock_mhz * clock_factor), throttle


def values(gpu: SimGpu) -> tuple[Any, ...]:
    """What read() reports for a GPU that answers, as (uuid, index, *sample_wire.METRIC_FIELDS values).

    The agent's fast path: the same numbers as read()'s GpuSample, without building a model.
    """
    spec = gpu.spec
    return (
        gpu.uuid,
        gpu.index,
        round(gpu.sm, 1),
        round(gpu.mem_util, 1),
        int(gpu.fb_used),
        spec.memory_bytes,
        int(gpu.pcie_tx),
        int(gpu.pcie_rx),
        round(gpu.temp, 1),
        round(gpu.mem_temp, 1),
        round(gpu.power, 1),
        float(spec.power_limit_w if gpu.power_cap_w is None else gpu.power_cap_w),
        gpu.sm_clock,
        spec.mem_clock_mhz,
        gpu.ecc_sbe,
        gpu.ecc_dbe,
        gpu.throttle,
        _tensor_active(gpu),
    )


def _tensor_active(gpu: SimGpu) -> float | None:
    """Tensor-core activity, %: its workloads' share of the SM activity; None without tensor cores."""
    return round(gpu.tensor, 1) if gpu.spec.tensor_cores else None


def read(gpu: SimGpu, *, now: datetime) -> GpuReading:
    """The sample a probe reports for this GPU now."""
    if gpu.lost is not None:
        return GpuLost(gpu_uuid=gpu.uuid, node=gpu.node, index=gpu.index, timestamp=now, reason=gpu.lost)
    spec = gpu.spec
    return GpuSample(
        gpu_uuid=gpu.uuid,
        node=gpu.node,
        index=gpu.index,
        timestamp=now,
        sm_util_pct=round(gpu.sm, 1),
        mem_util_pct=round(gpu.mem_util, 1),
        tensor_active_pct=_tensor_active(gpu),
        fb_used_bytes=int(gpu.fb_used),
        fb_total_bytes=spec.memory_bytes,
        pcie_tx_bytes_per_s=int(gpu.pcie_tx),
        pcie_rx_bytes_per_s=int(gpu.pcie_rx),
        gpu_temp_c=round(gpu.temp, 1),
        mem_temp_c=round(gpu.mem_temp, 1),
        power_w=round(gpu.power, 1),
        power_limit_w=spec.power_limit_w if gpu.power_cap_w is None else gpu.power_cap_w,
        sm_clock_mhz=gpu.sm_clock,
        mem_clock_mhz=spec.mem_clock_mhz,
        ecc_sbe_total=gpu.ecc_sbe,
        ecc_dbe_total=gpu.ecc_dbe,
        throttle_reasons=gpu.throttle,
    )
