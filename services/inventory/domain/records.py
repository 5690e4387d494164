"""Domain records of the registry: nodes, GPUs, partitions, allocations and discovery reports.

These frozen models are what a later phase persists (one row per node, GPU, partition and
allocation) and what it rebuilds in-memory state from; they carry no behaviour beyond ids.
"""

from __future__ import annotations

from decimal import Decimal
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, model_validator

from services.inventory.domain.health import GpuHealth, NodeStatus
from services.inventory.domain.mig import MigRequest
from services.inventory.domain.timeslice import WorkloadKind

__all__ = [
    "Allocation",
    "DiscoveredGpu",
    "Gpu",
    "Node",
    "NodeDiscovery",
    "NodeInventory",
    "NodeLabels",
    "Partition",
    "PartitionKind",
    "TimeSliceConfig",
]

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class NodeLabels(BaseModel):
    """Where a node sits and which pool it serves; capacity views group by these."""

    model_config = _FROZEN

    zone: str = Field(min_length=1)
    region: str = Field(min_length=1)
    pool: str = Field(default="default", min_length=1)
    edge: bool = False


class Node(BaseModel):
    """A GPU host."""

    model_config = _FROZEN

    hostname: str = Field(min_length=1)
    labels: NodeLabels
    status: NodeStatus = NodeStatus.READY


class PartitionKind(StrEnum):
    MIG = "mig"
    TIME_SLICE = "time_slice"


class Partition(BaseModel):
    """A schedulable piece of a GPU: a MIG instance at a slot, or one time-sliced share."""

    model_config = _FROZEN

    id: str
    gpu_uuid: str
    kind: PartitionKind
    profile: str | None = Field(default=None, description="MIG profile (MIG only)")
    start: int | None = Field(default=None, description="first memory slice (MIG only)")
    ratio: int | None = Field(default=None, description="sharing ratio (time slice only)")
    share: int | None = Field(default=None, description="share number 0..ratio-1 (time slice only)")
    units: Decimal
    memory_mib: int
    device_uuid: str | None = Field(
        default=None, description="MIG device UUID as discovery reported it (MIG only; None until then)"
    )


class TimeSliceConfig(BaseModel):
    """Time-slicing set on a whole GPU by an admin, and what it was set for."""

    model_config = _FROZEN

    ratio: int
    workload_kind: WorkloadKind
    warnings: tuple[str, ...] = ()


class Gpu(BaseModel):
    """A physical GPU, its hardware facts, health and current partitioning."""

    model_config = _FROZEN

    uuid: str = Field(min_length=1)
    index: int = Field(ge=0)
    model: str = Field(description="canonical catalog name")
    memory_mib: int = Field(gt=0)
    node: str
    pci_bus_id: str
    nvlink_peers: tuple[str, ...] = ()
    mig_enabled: bool = False
    health: GpuHealth = GpuHealth.HEALTHY
    units: Decimal = Field(description="compute units of the whole GPU")
    time_slice: TimeSliceConfig | None = None
    partitions: tuple[Partition, ...] = ()

    @property
    def capacity_units(self) -> Decimal:
        """Units this GPU can hand out: its partitions' sum when partitioned, else the whole GPU."""
        if self.partitions:
            return sum((p.units for p in self.partitions), Decimal(0))
        return self.units


class NodeInventory(BaseModel):
    """The per-node aggregate: a node and its GPUs, changed together by discovery."""

    model_config = _FROZEN

    node: Node
    gpus: tuple[Gpu, ...] = ()

    def gpu(self, uuid: str) -> Gpu | None:
        return next((g for g in self.gpus if g.uuid == uuid), None)


class Allocation(BaseModel):
    """Scheduler-owned use of a GPU or of one of its partitions, in compute units."""

    model_config = _FROZEN

    allocation_id: str = Field(min_length=1)
    workload_id: str = Field(min_length=1)
    gpu_uuid: str = Field(min_length=1)
    partition_id: str | None = None
    units: Decimal = Field(gt=0)


class DiscoveredGpu(BaseModel):
    """What the node agent (NVML or the simulated fleet) reports about one GPU."""

    model_config = _FROZEN

    uuid: str = Field(min_length=1)
    index: int = Field(ge=0)
    model: str = Field(description="catalog name or NVML product name")
    memory_mib: int | None = Field(default=None, gt=0, description="None: take the catalog's")
    pci_bus_id: str
    nvlink_peers: tuple[str, ...] = ()
    mig_enabled: bool = False
    mig_instances: tuple[MigRequest, ...] = ()
    #: The MIG device UUID of each of ``mig_instances``, in the same order (None where not reported).
    mig_device_uuids: tuple[str | None, ...] = ()

    @model_validator(mode="after")
    def _one_uuid_per_instance(self) -> DiscoveredGpu:
        if self.mig_device_uuids and len(self.mig_device_uuids) != len(self.mig_instances):
            raise ValueError(
                f"GPU {self.uuid}: {len(self.mig_device_uuids)} MIG device UUIDs for "
                f"{len(self.mig_instances)} MIG instances"
            )
        return self


class NodeDiscovery(BaseModel):
    """One full discovery report of a node: its labels and every GPU it has now."""

    model_config = _FROZEN

    hostname: str = Field(min_length=1)
    labels: NodeLabels
    gpus: tuple[DiscoveredGpu, ...] = ()
