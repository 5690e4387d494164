"""Per-second GPU samples and per-minute rollups (keyed by node), and fault signals (keyed by GPU)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from libs.common.events import topics
from libs.common.events.base import Event

SAMPLES_TOPIC = topics.TELEMETRY_SAMPLES
ROLLUPS_TOPIC = topics.TELEMETRY_ROLLUPS
FAULTS_TOPIC = topics.TELEMETRY_FAULTS

FaultKind = Literal["xid", "ecc", "thermal", "power", "lost", "agent_silent", "pcie", "oom"]


class GpuMetrics(BaseModel):
    """The core metrics of one GPU (or MIG instance) at one instant; None = not supported."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    gpu: str = Field(description="GPU UUID (or MIG device UUID).")
    index: int = Field(description="Index on the node.")
    model: str = Field(default="", description="GPU model.")
    sm_util_pct: float | None = Field(default=None, description="Compute (SM) utilisation, %.")
    mem_util_pct: float | None = Field(default=None, description="Memory-controller utilisation, %.")
    tensor_active_pct: float | None = Field(
        default=None,
        description="Time any tensor-core pipe was active, % (NVML GPM: Hopper and later; None elsewhere "
        "and on the first sample after start). Added after the other metrics: older agents leave it out.",
    )
    fb_used_bytes: int | None = Field(default=None, description="Framebuffer used, bytes.")
    fb_total_bytes: int | None = Field(default=None, description="Framebuffer total, bytes.")
    pcie_tx_bytes_per_s: float | None = Field(default=None, description="PCIe transmit, bytes/s.")
    pcie_rx_bytes_per_s: float | None = Field(default=None, description="PCIe receive, bytes/s.")
    gpu_temp_c: float | None = Field(default=None, description="GPU temperature, °C.")
    mem_temp_c: float | None = Field(default=None, description="Memory (HBM) temperature, °C.")
    power_w: float | None = Field(default=None, description="Power draw, W.")
    power_limit_w: float | None = Field(default=None, description="Enforced power limit, W.")
    sm_clock_mhz: float | None = Field(default=None, description="SM clock, MHz.")
    mem_clock_mhz: float | None = Field(default=None, description="Memory clock, MHz.")
    ecc_sbe_count: int | None = Field(default=None, description="Volatile single-bit ECC errors.")
    ecc_dbe_count: int | None = Field(default=None, description="Volatile double-bit ECC errors.")
    xid_count: int | None = Field(default=None, description="XID errors seen (a counter).")
    xid_counts: dict[int, int] | None = Field(
        default=None, description="XID errors seen per XID code (counters); only GPUs that raised any."
    )
    throttle_reasons: int | None = Field(default=None, description="NVML clock-throttle bitmask.")
    workload_id: str | None = Field(default=None, description="Workload allocated, if any.")
    tenant_id: str | None = Field(default=None, description="Tenant allocated, if any.")
    lost_reason: str | None = Field(default=None, description="Set when the GPU stopped answering.")
    parent_gpu: str | None = Field(default=None, description="Parent GPU UUID when this is a MIG instance.")

    @property
    def fb_used_pct(self) -> float | None:
        """Framebuffer used as a percentage of total."""
        return fb_used_pct(self.fb_used_bytes, self.fb_total_bytes)


def fb_used_pct(used: float | None, total: float | None) -> float | None:
    """Framebuffer used as a percentage of total; None when either is unknown or the total is 0."""
    if used is None or not total:
        return None
    return 100.0 * used / total


class SampleBatchV1(Event):
    """One node's samples for one tick."""

    type: Literal["telemetry.samples.batch.v1"] = "telemetry.samples.batch.v1"
    node: str = Field(description="Hostname.")
    at: datetime = Field(description="Sampling instant (UTC).")
    samples: list[GpuMetrics] = Field(description="One entry per GPU or MIG instance.")

    def subject(self) -> str:
        return self.node


class FaultSignaledV1(Event):
    """A fault was observed on a GPU or node, with the evidence that showed it."""

    type: Literal["telemetry.fault.signaled.v1"] = "telemetry.fault.signaled.v1"
    fault_id: str = Field(description="Unique id of this observation.")
    kind: FaultKind = Field(description="What kind of fault.")
    xid: int | None = Field(default=None, description="XID code when kind is xid.")
    gpu_uuid: str | None = Field(default=None, description="GPU, None for node-level faults.")
    node: str = Field(description="Hostname.")
    at: datetime = Field(description="When it was observed.")
    evidence: dict[str, Any] = Field(default_factory=dict, description="Readings that show the fault.")

    def subject(self) -> str:
        return self.gpu_uuid or self.node


class GpuRollup(BaseModel):
    """One GPU's one-minute summary."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    gpu: str = Field(description="GPU UUID.")
    sm_util_avg: float | None = Field(default=None, description="Mean SM utilisation, %.")
    sm_util_max: float | None = Field(default=None, description="Max SM utilisation, %.")
    fb_used_pct_max: float | None = Field(default=None, description="Max framebuffer used, %.")
    power_w_avg: float | None = Field(default=None, description="Mean power draw, W.")
    samples: int = Field(description="Samples in the minute.")
    workload_id: str | None = Field(default=None, description="Workload allocated during the minute.")
    tenant_id: str | None = Field(default=None, description="Tenant allocated during the minute.")


class NodeRollupV1(Event):
    """One node's one-minute rollups (for idle detection and history in other services)."""

    type: Literal["telemetry.rollup.node.v1"] = "telemetry.rollup.node.v1"
    node: str = Field(description="Hostname.")
    minute: datetime = Field(description="Start of the minute (UTC).")
    gpus: list[GpuRollup] = Field(description="One entry per GPU.")

    def subject(self) -> str:
        return self.node


SAMPLE_EVENTS: tuple[type[Event], ...] = (SampleBatchV1,)
ROLLUP_EVENTS: tuple[type[Event], ...] = (NodeRollupV1,)
FAULT_EVENTS: tuple[type[Event], ...] = (FaultSignaledV1,)
