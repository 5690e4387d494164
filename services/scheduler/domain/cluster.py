"""The scheduler's own view of GPUs (learnt from inventory events) and of what workloads hold."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import NamedTuple

__all__ = [
    "DEFAULT_POOL",
    "WHOLE_SLOT",
    "Allocation",
    "ClusterState",
    "GpuMode",
    "GpuView",
    "Grant",
    "MigPartition",
    "SlotKind",
    "SlotType",
    "share_slot",
    "slots_of",
]

WHOLE_SLOT = ""  # the slot id of a whole-GPU grant
DEFAULT_POOL = "default"


class GpuMode(StrEnum):
    """How a GPU is handed out: whole, as MIG instances, or as time-slice shares."""

    WHOLE = "whole"
    MIG = "mig"
    TIMESLICE = "timeslice"


class SlotKind(StrEnum):
    """The kind of one allocatable slot."""

    WHOLE = "whole"
    MIG = "mig"
    SHARE = "share"


class SlotType(NamedTuple):
    """Interchangeable slots: same kind, model, memory, MIG profile, unit value and time-slice ratio."""

    kind: SlotKind
    model: str
    memory_gb: int
    profile: str
    units: float
    #: How many shares the GPU is sliced into (a share slot); 1 for a whole GPU or a MIG slice.
    ratio: int = 1


@dataclass(frozen=True, slots=True)
class MigPartition:
    """One MIG instance of a GPU."""

    id: str
    profile: str
    units: float


@dataclass(frozen=True, slots=True)
class GpuView:
    """What the scheduler knows about one GPU; `timeslice_ratio` r > 1 means r shares of units/r."""

    uuid: str
    node: str
    model: str
    memory_gb: int
    units: float
    healthy: bool = True
    labels: Mapping[str, str] = field(default_factory=dict)
    partitions: tuple[MigPartition, ...] = ()
    timeslice_ratio: int = 1

    @property
    def mode(self) -> GpuMode:
        """Whole, MIG or time-sliced, from how the GPU is configured."""
        if self.partitions:
            return GpuMode.MIG
        return GpuMode.TIMESLICE if self.timeslice_ratio > 1 else GpuMode.WHOLE

    @property
    def pool(self) -> str:
        """The capacity pool the reserved-pool rule accounts this GPU to."""
        return self.labels.get("pool", DEFAULT_POOL)


@dataclass(frozen=True, slots=True)
class Grant:
    """One slot held by a workload: a whole GPU, a MIG instance or a time-slice share."""

    gpu: str
    node: str
    slot: str
    units: float
    kind: SlotKind = SlotKind.WHOLE

    @property
    def key(self) -> tuple[str, str]:
        """Identity of the slot; no two live grants may share it."""
        return (self.gpu, self.slot)


@dataclass(frozen=True, slots=True)
class Allocation:
    """What one placed or running workload holds, and when it is expected to end."""

    workload_id: str
    tenant: str
    grants: tuple[Grant, ...]
    priority: float
    preemptible: bool = False
    ends_at: datetime | None = None
    preempt_deadline: datetime | None = None

    @property
    def units(self) -> float:
        """Compute units held."""
        return sum(g.units for g in self.grants)


@dataclass(frozen=True, slots=True)
class ClusterState:
    """Every GPU the scheduler knows and every live allocation."""

    gpus: tuple[GpuView, ...]
    allocations: tuple[Allocation, ...] = ()


def share_slot(index: int) -> str:
    """The slot id of time-slice share `index`."""
    return f"share:{index}"


def slots_of(gpu: GpuView) -> Iterator[tuple[SlotType, Grant]]:
    """Every allocatable slot of a GPU with its type, as the grant that would hold it."""
    mode = gpu.mode
    if mode is GpuMode.MIG:
        for p in gpu.partitions:
            kind = SlotKind.MIG
            yield (
                SlotType(kind, gpu.model, gpu.memory_gb, p.profile, p.units),
                Grant(gpu.uuid, gpu.node, p.id, p.units, kind),
            )
    elif mode is GpuMode.TIMESLICE:
        units = gpu.units / gpu.timeslice_ratio
        stype = SlotType(SlotKind.SHARE, gpu.model, gpu.memory_gb, "", units, gpu.timeslice_ratio)
        for i in range(gpu.timeslice_ratio):
            yield stype, Grant(gpu.uuid, gpu.node, share_slot(i), units, SlotKind.SHARE)
    else:
        yield (
            SlotType(SlotKind.WHOLE, gpu.model, gpu.memory_gb, "", gpu.units),
            Grant(gpu.uuid, gpu.node, WHOLE_SLOT, gpu.units),
        )
