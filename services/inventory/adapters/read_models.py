"""Read models: what the read queries return and the API shows (nodes, GPUs, partitions, capacity)."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from pydantic import BaseModel, Field

__all__ = [
    "AllocationOut",
    "CapacityFigures",
    "CapacityOut",
    "GpuDetail",
    "GpuOut",
    "HealthEntry",
    "NodeOut",
    "PartitionOut",
    "TimeSliceOut",
]


class NodeOut(BaseModel):
    """A GPU host."""

    hostname: str
    zone: str
    region: str
    pool: str
    edge: bool
    status: str
    gpus: int
    updated_at: datetime


class PartitionOut(BaseModel):
    """A MIG instance or a time-sliced share."""

    id: str
    gpu_uuid: str
    kind: str
    profile: str | None
    slot: int | None
    ratio: int | None
    share: int | None
    units: Decimal
    memory_mib: int


class TimeSliceOut(BaseModel):
    """A GPU's time-slicing."""

    ratio: int
    workload_kind: str
    warnings: list[str]


class GpuOut(BaseModel):
    """A GPU with its node's labels."""

    uuid: str
    node: str
    index: int
    model: str
    memory_mib: int
    pci_bus_id: str
    nvlink_peers: list[str]
    mig_enabled: bool
    health: str
    units: Decimal = Field(description="Compute units of the whole GPU.")
    capacity_units: Decimal = Field(description="Units it can hand out (sum of partitions when partitioned).")
    time_slice: TimeSliceOut | None
    pool: str
    zone: str
    region: str


class AllocationOut(BaseModel):
    """One allocation holding a GPU (tenants see only their own)."""

    allocation_id: str
    placement_id: str
    workload_id: str
    tenant_id: str
    partition_id: str | None
    units: Decimal
    memory_mib: int = Field(
        description="Memory it holds: the whole GPU's, the MIG instance's, or a time-sliced share's "
        "GPU memory / ratio."
    )
    memory_isolated: bool = Field(
        description="False for a time-sliced share: without MPS nothing fences its memory off from the "
        "GPU's other shares, so memory_mib is its fair part, not a limit."
    )
    created_at: datetime


class HealthEntry(BaseModel):
    """One recorded health change."""

    action: str
    from_state: str
    to_state: str
    reason: str
    source: str
    at: datetime


class CapacityFigures(BaseModel):
    """One progress bar: total / allocated / free units, GPUs and memory, and fragmentation."""

    total_units: Decimal
    allocated_units: Decimal
    free_units: Decimal
    unavailable_units: Decimal = Field(description="Unallocated units on draining/failed GPUs or nodes.")
    fragmented_units: Decimal = Field(description="Free units on GPUs already partly in use.")
    total_gpus: int
    in_use_gpus: int
    free_gpus: int = Field(description="Healthy GPUs with nothing allocated: whole-GPU requests fit.")
    unavailable_gpus: int
    total_memory_mib: int
    allocated_memory_mib: int
    free_memory_mib: int


class GpuDetail(GpuOut):
    """A GPU with its partitions, allocations, capacity and recent health history."""

    partitions: list[PartitionOut]
    allocations: list[AllocationOut]
    capacity: CapacityFigures
    health_history: list[HealthEntry]


class CapacityOut(BaseModel):
    """Capacity of the pool (after filters) and per requested grouping."""

    total: CapacityFigures
    by_pool: dict[str, CapacityFigures] | None = None
    by_zone: dict[str, CapacityFigures] | None = None
    by_node: dict[str, CapacityFigures] | None = None
    by_model: dict[str, CapacityFigures] | None = None
    by_gpu: dict[str, CapacityFigures] | None = None
