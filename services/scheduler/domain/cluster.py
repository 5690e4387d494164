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
    "SlotMemory",
    "SlotType",
    "share_slot",
    "slot_memory",
    "slots_of",
]

WHOLE_SLOT = ""  # the slot id of a whole-GPU grant
DEFAULT_POOL = "default"
_GIB = 1024**3


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
    #: Memory one slot gives its holder, GiB (as slot_memory, from the card's rounded GiB): the card's for
    #: a whole GPU, the instance's for MIG, the card's / ratio for a share. A memory floor is checked on
    #: whole GPUs only, so always against the physical card.
    memory_gb: float
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
    #: The instance's own memory as inventory reported it; None when unknown (then the card's).
    memory_bytes: int | None = None
    #: The host's MIG device UUID (``MIG-...``) of the instance; None until discovery reports it.
    device_uuid: str | None = None


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
    #: The card's memory as inventory reported it; None when only memory_gb is known.
    memory_bytes: int | None = None

    @property
    def card_memory_bytes(self) -> int:
        """The physical card's memory: what a memory floor and a whole-GPU grant see."""
        return self.memory_bytes if self.memory_bytes is not None else self.memory_gb * _GIB

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


@dataclass(frozen=True, slots=True)
class SlotMemory:
    """Memory one slot gives its holder, and whether it is fenced off from the GPU's other holders."""

    bytes: int
    isolated: bool


def slot_memory(gpu: GpuView, grant: Grant) -> SlotMemory:
    """Memory a grant gives its holder: the whole card, a MIG instance's own, or a share's part.

    A share is 1/ratio of the card and not isolated: time-slicing (without MPS) fences nothing, so
    the figure is the holder's fair part, not a limit the driver enforces. MIG instances are isolated.
    """
    card = gpu.card_memory_bytes
    if grant.kind is SlotKind.SHARE:
        return SlotMemory(card // max(gpu.timeslice_ratio, 1), isolated=False)
    if grant.kind is SlotKind.MIG:
        part = next((p for p in gpu.partitions if p.id == grant.slot), None)
        if part is not None and part.memory_bytes is not None:
            return SlotMemory(part.memory_bytes, isolated=True)
    return SlotMemory(card, isolated=True)


def slots_of(gpu: GpuView) -> Iterator[tuple[SlotType, Grant]]:
    """Every allocatable slot of a GPU with its type, as the grant that would hold it."""
    mode = gpu.mode
    if mode is GpuMode.MIG:
        for p in gpu.partitions:
            kind = SlotKind.MIG
            memory = gpu.memory_gb if p.memory_bytes is None else round(p.memory_bytes / _GIB)
            yield (
                SlotType(kind, gpu.model, memory, p.profile, p.units),
                Grant(gpu.uuid, gpu.node, p.id, p.units, kind),
            )
    elif mode is GpuMode.TIMESLICE:
        units = gpu.units / gpu.timeslice_ratio
        memory_gb = gpu.memory_gb / gpu.timeslice_ratio  # the share's part, as slot_memory says
        stype = SlotType(SlotKind.SHARE, gpu.model, memory_gb, "", units, gpu.timeslice_ratio)
        for i in range(gpu.timeslice_ratio):
            yield stype, Grant(gpu.uuid, gpu.node, share_slot(i), units, SlotKind.SHARE)
    else:
        yield (
            SlotType(SlotKind.WHOLE, gpu.model, gpu.memory_gb, "", gpu.units),
            Grant(gpu.uuid, gpu.node, WHOLE_SLOT, gpu.units),
        )
