"""Inventory facts: nodes, GPUs, partitions and health. Keyed by node or GPU."""

from __future__ import annotations

from decimal import Decimal
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from libs.common.events import topics
from libs.common.events.base import Event

TOPIC = topics.INVENTORY

GpuHealth = Literal["healthy", "degraded", "draining", "failed"]


class PartitionInfo(BaseModel):
    """One allocatable slice of a GPU: a MIG instance or a time-sliced share."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    partition_id: str = Field(description="Stable id, unique within the GPU.")
    kind: Literal["mig", "share"] = Field(description="MIG instance or time-sliced share.")
    profile: str | None = Field(default=None, description="MIG profile such as 1g.10gb; None for shares.")
    slot: int | None = Field(default=None, description="MIG start slot; None for shares.")
    units: Decimal = Field(description="Compute units this slice is worth.")
    memory_bytes: int = Field(description="Memory available to this slice.")
    device_uuid: str | None = Field(
        default=None,
        description="The MIG device's UUID (MIG-...) as the node agent discovered it; None for shares and "
        "until discovery reports the instance.",
    )


class NodeRegisteredV1(Event):
    """A node joined the pool or its labels or status changed."""

    type: Literal["inventory.node.registered.v1"] = "inventory.node.registered.v1"
    node: str = Field(description="Hostname.")
    labels: dict[str, str] = Field(default_factory=dict, description="zone, region, edge, pool...")
    status: str = Field(default="ready", description="ready, cordoned or offline.")

    def subject(self) -> str:
        return self.node


class GpuRegisteredV1(Event):
    """A GPU was discovered or its static facts changed."""

    type: Literal["inventory.gpu.registered.v1"] = "inventory.gpu.registered.v1"
    gpu_uuid: str = Field(description="NVML UUID.")
    node: str = Field(description="Hostname of the GPU's node.")
    index: int = Field(description="Index on the node.")
    model: str = Field(description="Catalog model name, e.g. A100-80GB.")
    memory_bytes: int = Field(description="Framebuffer size.")
    units: Decimal = Field(description="Compute units of the whole GPU.")
    health: GpuHealth = Field(default="healthy", description="Current health.")
    labels: dict[str, str] = Field(default_factory=dict, description="The node's labels.")
    pci_bus_id: str | None = Field(default=None, description="PCIe bus id.")
    nvlink_peers: list[str] = Field(default_factory=list, description="UUIDs reachable over NVLink.")
    mig_enabled: bool = Field(default=False, description="Whether MIG mode is on.")
    time_slice_ratio: int = Field(default=1, description="1 = not shared.")
    partitions: list[PartitionInfo] = Field(default_factory=list, description="Allocatable slices.")

    def subject(self) -> str:
        return self.gpu_uuid


class GpuPartitionsChangedV1(Event):
    """A GPU's MIG layout or time-slice ratio changed; ``partitions`` is the complete new set."""

    type: Literal["inventory.gpu.partitions_changed.v1"] = "inventory.gpu.partitions_changed.v1"
    gpu_uuid: str = Field(description="NVML UUID.")
    node: str = Field(description="Hostname.")
    mig_enabled: bool = Field(description="Whether MIG mode is on.")
    time_slice_ratio: int = Field(description="1 = not shared.")
    partitions: list[PartitionInfo] = Field(description="The complete new set of slices.")

    def subject(self) -> str:
        return self.gpu_uuid


class GpuHealthChangedV1(Event):
    """A GPU's health changed (drain, undrain, fault, recovery)."""

    type: Literal["inventory.gpu.health_changed.v1"] = "inventory.gpu.health_changed.v1"
    gpu_uuid: str = Field(description="NVML UUID.")
    node: str = Field(description="Hostname.")
    previous: GpuHealth = Field(description="Health before.")
    health: GpuHealth = Field(description="Health now.")
    reason: str = Field(description="Why it changed.")

    def subject(self) -> str:
        return self.gpu_uuid


EVENTS: tuple[type[Event], ...] = (
    NodeRegisteredV1,
    GpuRegisteredV1,
    GpuPartitionsChangedV1,
    GpuHealthChangedV1,
)
