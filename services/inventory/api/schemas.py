"""Request and response bodies of the inventory API (the read models are re-exported from adapters)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from services.inventory.adapters.read_models import (
    AllocationOut,
    CapacityFigures,
    CapacityOut,
    GpuDetail,
    GpuOut,
    HealthEntry,
    NodeOut,
    PartitionOut,
    TimeSliceOut,
)
from services.inventory.domain.timeslice import WorkloadKind

__all__ = [
    "AllocationOut",
    "CapacityFigures",
    "CapacityOut",
    "FleetResult",
    "GpuDetail",
    "GpuOut",
    "HealthChange",
    "HealthEntry",
    "MigLayout",
    "NodeOut",
    "PartitionOut",
    "TimeSliceOut",
    "TimeSlicing",
    "TimeSlicingResult",
]

_IN = ConfigDict(extra="forbid")


class HealthChange(BaseModel):
    """Why a GPU is drained or returned."""

    model_config = _IN

    reason: str = Field(min_length=1, max_length=500, description="Recorded with the change.")


class MigLayout(BaseModel):
    """A MIG layout: profile names, optionally pinned to a start slot as 'profile@slot'; [] = MIG off."""

    model_config = _IN

    profiles: list[str] = Field(max_length=7, description="e.g. ['3g.40gb', '2g.20gb', '1g.10gb@6'].")


class TimeSlicing(BaseModel):
    """A sharing ratio (1 = not shared) and what the shares will run."""

    model_config = _IN

    ratio: int = Field(description="1..16; above 4 refused for training.")
    workload_kind: WorkloadKind = Field(description="training, inference or graphics.")


class TimeSlicingResult(BaseModel):
    """The GPU after time-slicing was set, with any warning."""

    gpu: GpuOut
    partitions: list[PartitionOut]
    warnings: list[str]


class FleetResult(BaseModel):
    """What registering a fleet file changed."""

    nodes: int
    nodes_changed: int
    gpus: int
    gpus_changed: int
    events: int
