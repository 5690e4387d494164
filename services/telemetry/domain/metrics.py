"""The core GPU metrics and the sample models that carry them.

| metric | GpuSample field(s) | unit | Prometheus (dcgm-exporter) |
| --- | --- | --- | --- |
| SM (compute) util | sm_util_pct | % | DCGM_FI_DEV_GPU_UTIL |
| memory-controller util | mem_util_pct | % | DCGM_FI_DEV_MEM_COPY_UTIL |
| tensor-core activity | tensor_active_pct | % (exported as ratio 0..1) | DCGM_FI_PROF_PIPE_TENSOR_ACTIVE |
| framebuffer used, total | fb_used_bytes, fb_total_bytes, fb_used_pct | B, % | DCGM_FI_DEV_FB_USED, _TOTAL |
| PCIe TX, RX | pcie_tx_bytes_per_s, pcie_rx_bytes_per_s | B/s | DCGM_FI_PROF_PCIE_TX/RX_BYTES |
| GPU temperature | gpu_temp_c | °C | DCGM_FI_DEV_GPU_TEMP |
| HBM temperature | mem_temp_c | °C | DCGM_FI_DEV_MEMORY_TEMP |
| power draw, limit | power_w, power_limit_w | W | DCGM_FI_DEV_POWER_USAGE, ..LIMIT |
| SM clock | sm_clock_mhz | MHz | DCGM_FI_DEV_SM_CLOCK |
| memory clock | mem_clock_mhz | MHz | DCGM_FI_DEV_MEM_CLOCK |
| ECC SBE/DBE | ecc_sbe_total, ecc_dbe_total | count | DCGM_FI_DEV_ECC_SBE/DBE_VOL_TOTAL |
| XID errors | XidEvent, counted by xid.XidCounter | count | DCGM_EXP_XID_ERRORS_TOTAL{xid=..} |
| throttle reasons | throttle_reasons, throttle_names | bitmask | DCGM_FI_DEV_CLOCK_THROTTLE_REASONS |

METRICS below is the authoritative list (field, unit, exact Prometheus name, gauge or counter).
Tensor-core activity comes from NVML's GPM API (Hopper and later): a rate between two samples, so the
first reading after start is None, as it is on GPUs without GPM.

Every metric is optional: None means the device or driver does not support it, never zero.
XID errors are events, not gauges: a sample never carries "the last XID".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "METRICS",
    "PROMETHEUS_NAMES",
    "THROTTLE_REASON_BITS",
    "GpuLost",
    "GpuReading",
    "GpuSample",
    "MetricSpec",
    "MigSample",
    "SampleBatch",
    "Unit",
    "XidEvent",
    "decode_throttle_reasons",
]


class Unit(StrEnum):
    """Units the core metrics are reported in."""

    PERCENT = "percent"
    BYTES = "bytes"
    BYTES_PER_SECOND = "bytes_per_second"
    CELSIUS = "celsius"
    WATTS = "watts"
    MEGAHERTZ = "megahertz"
    COUNT = "count"
    BITMASK = "bitmask"
    RATIO = "ratio"


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One exported metric: GpuSample field, unit, Prometheus name and type."""

    field: str
    unit: Unit
    prometheus: str
    kind: Literal["gauge", "counter"]
    help: str
    ratio: bool = False  # a percent field exported as dcgm-exporter's 0..1 ratio (its profiling fields)

    @property
    def exposed_unit(self) -> Unit:
        """The unit of the exported value."""
        return Unit.RATIO if self.ratio else self.unit


METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("sm_util_pct", Unit.PERCENT, "DCGM_FI_DEV_GPU_UTIL", "gauge", "SM (compute) utilisation"),
    MetricSpec("mem_util_pct", Unit.PERCENT, "DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory-controller util"),
    MetricSpec(
        "tensor_active_pct",
        Unit.PERCENT,
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "gauge",
        "Share of time any tensor-core pipe was active",
        ratio=True,
    ),
    MetricSpec("fb_used_bytes", Unit.BYTES, "DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used"),
    MetricSpec("fb_total_bytes", Unit.BYTES, "DCGM_FI_DEV_FB_TOTAL", "gauge", "Framebuffer memory total"),
    MetricSpec("fb_used_pct", Unit.PERCENT, "DCGM_FI_DEV_FB_USED_PERCENT", "gauge", "Framebuffer used share"),
    MetricSpec(
        "pcie_tx_bytes_per_s", Unit.BYTES_PER_SECOND, "DCGM_FI_PROF_PCIE_TX_BYTES", "gauge", "PCIe TX"
    ),
    MetricSpec(
        "pcie_rx_bytes_per_s", Unit.BYTES_PER_SECOND, "DCGM_FI_PROF_PCIE_RX_BYTES", "gauge", "PCIe RX"
    ),
    MetricSpec("gpu_temp_c", Unit.CELSIUS, "DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU die temperature"),
    MetricSpec("mem_temp_c", Unit.CELSIUS, "DCGM_FI_DEV_MEMORY_TEMP", "gauge", "HBM temperature"),
    MetricSpec("power_w", Unit.WATTS, "DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw"),
    MetricSpec("power_limit_w", Unit.WATTS, "DCGM_FI_DEV_POWER_MGMT_LIMIT", "gauge", "Enforced power limit"),
    MetricSpec("sm_clock_mhz", Unit.MEGAHERTZ, "DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock"),
    MetricSpec("mem_clock_mhz", Unit.MEGAHERTZ, "DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock"),
    MetricSpec(
        "ecc_sbe_total", Unit.COUNT, "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Single-bit ECC errors"
    ),
    MetricSpec(
        "ecc_dbe_total", Unit.COUNT, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Double-bit ECC errors"
    ),
    MetricSpec("xid_total", Unit.COUNT, "DCGM_EXP_XID_ERRORS_TOTAL", "counter", "XID errors by xid code"),
    MetricSpec(
        "throttle_reasons", Unit.BITMASK, "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "gauge", "Throttle mask"
    ),
)

PROMETHEUS_NAMES: dict[str, str] = {spec.field: spec.prometheus for spec in METRICS}

# NVML's nvmlClocksThrottleReason* bits (stable across driver versions; nvml.h).
THROTTLE_REASON_BITS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


def decode_throttle_reasons(mask: int) -> tuple[str, ...]:
    """Name the set bits of an NVML clock-throttle mask; unknown bits become `bit_0x...`."""
    names = [name for bit, name in THROTTLE_REASON_BITS.items() if mask & bit]
    unknown = mask & ~sum(THROTTLE_REASON_BITS)
    bit = 1
    while unknown >= bit:
        if unknown & bit:
            names.append(f"bit_{bit:#x}")
        bit <<= 1
    return tuple(names)


_FROZEN = ConfigDict(frozen=True, extra="ignore")


class MigSample(BaseModel):
    """The readings NVML gives for one MIG instance (most utilisation metrics need DCGM there)."""

    model_config = _FROZEN
    mig_uuid: str = Field(description="MIG device UUID (MIG-...)")
    gpu_instance_id: int = Field(description="GPU instance id on the parent GPU")
    compute_instance_id: int | None = Field(default=None, description="Compute instance id")
    fb_used_bytes: int | None = Field(default=None, description="Memory used by the instance, bytes")
    fb_total_bytes: int | None = Field(default=None, description="Memory of the instance, bytes")
    sm_util_pct: float | None = Field(default=None, description="SM utilisation %, when reported")


class GpuSample(BaseModel):
    """One reading of one GPU at one instant; None = metric not supported there."""

    model_config = _FROZEN
    kind: Literal["sample"] = "sample"
    gpu_uuid: str = Field(description="GPU UUID (GPU-...)")
    node: str = Field(description="Hostname of the node")
    index: int = Field(description="NVML index of the GPU on its node")
    timestamp: datetime = Field(description="When the reading was taken (UTC)")
    sm_util_pct: float | None = Field(default=None, ge=0, le=100, description="SM utilisation, %")
    mem_util_pct: float | None = Field(default=None, ge=0, le=100, description="Memory-controller util, %")
    tensor_active_pct: float | None = Field(
        default=None, ge=0, le=100, description="Time any tensor-core pipe was active, % (NVML GPM)"
    )
    fb_used_bytes: int | None = Field(default=None, ge=0, description="Framebuffer used, bytes")
    fb_total_bytes: int | None = Field(default=None, ge=0, description="Framebuffer total, bytes")
    pcie_tx_bytes_per_s: int | None = Field(default=None, ge=0, description="PCIe transmit, bytes/s")
    pcie_rx_bytes_per_s: int | None = Field(default=None, ge=0, description="PCIe receive, bytes/s")
    gpu_temp_c: float | None = Field(default=None, description="GPU temperature, °C")
    mem_temp_c: float | None = Field(default=None, description="HBM temperature, °C")
    power_w: float | None = Field(default=None, ge=0, description="Power draw, W")
    power_limit_w: float | None = Field(default=None, ge=0, description="Enforced power limit, W")
    sm_clock_mhz: int | None = Field(default=None, ge=0, description="SM clock, MHz")
    mem_clock_mhz: int | None = Field(default=None, ge=0, description="Memory clock, MHz")
    ecc_sbe_total: int | None = Field(default=None, ge=0, description="Volatile single-bit ECC count")
    ecc_dbe_total: int | None = Field(default=None, ge=0, description="Volatile double-bit ECC count")
    throttle_reasons: int | None = Field(default=None, ge=0, description="NVML clock-throttle bitmask")
    mig: tuple[MigSample, ...] = Field(default=(), description="Per-MIG-instance readings")

    @property
    def fb_used_pct(self) -> float | None:
        """Framebuffer used as a percentage of total."""
        if self.fb_used_bytes is None or not self.fb_total_bytes:
            return None
        return 100.0 * self.fb_used_bytes / self.fb_total_bytes

    @property
    def throttle_names(self) -> tuple[str, ...]:
        """Decoded throttle reasons (empty when unknown or none)."""
        return () if self.throttle_reasons is None else decode_throttle_reasons(self.throttle_reasons)

    def unsupported(self) -> tuple[str, ...]:
        """Names of the metric fields this sample could not read."""
        return tuple(
            s.field for s in METRICS if s.field in type(self).model_fields and getattr(self, s.field) is None
        )


class GpuLost(BaseModel):
    """A GPU that stopped answering (fell off the bus); recovery reacts to this reading."""

    model_config = _FROZEN
    kind: Literal["lost"] = "lost"
    gpu_uuid: str = Field(description="GPU UUID as last discovered")
    node: str = Field(description="Hostname of the node")
    index: int = Field(description="NVML index of the GPU on its node")
    timestamp: datetime = Field(description="When the loss was observed (UTC)")
    reason: str = Field(description="What the probe saw, e.g. the NVML error")


GpuReading = GpuSample | GpuLost


class XidEvent(BaseModel):
    """One XID error reported by the driver for one GPU."""

    model_config = _FROZEN
    gpu_uuid: str = Field(description="GPU the XID was raised on")
    node: str = Field(description="Hostname of the node")
    xid: int = Field(ge=0, description="XID code, e.g. 79 = fallen off the bus")
    timestamp: datetime = Field(description="When the probe received the event (UTC)")
    gpu_instance_id: int | None = Field(default=None, description="MIG GPU instance, when scoped")
    compute_instance_id: int | None = Field(default=None, description="MIG compute instance, when scoped")


class SampleBatch(BaseModel):
    """Everything one node read in one tick: the unit the agent publishes, keyed by node."""

    model_config = _FROZEN
    node: str = Field(description="Hostname of the node")
    timestamp: datetime = Field(description="Tick time (UTC)")
    readings: tuple[Annotated[GpuSample | GpuLost, Field(discriminator="kind")], ...] = Field(
        description="One reading per GPU"
    )
    xids: tuple[XidEvent, ...] = Field(default=(), description="XID events since the previous batch")

    def to_wire(self) -> bytes:
        """Compact JSON: unsupported (None) fields are left out."""
        return self.model_dump_json(exclude_none=True).encode()
