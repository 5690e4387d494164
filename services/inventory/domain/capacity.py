"""Capacity: what the pool holds, uses and can still offer, from GPUs plus the allocation ledger.

The ledger applies allocation and release events idempotently by allocation id, so a redelivered
event changes nothing. Views are the data behind progress bars: total / allocated / free in
units, GPUs and memory, and fragmentation, per pool, zone, node, model and GPU.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from decimal import Decimal

from pydantic import BaseModel, ConfigDict

from services.inventory.domain.errors import AllocationConflictError
from services.inventory.domain.health import gpu_offers_capacity, node_offers_capacity
from services.inventory.domain.records import Allocation, Gpu, Node, NodeInventory, PartitionKind

__all__ = [
    "CapacityFigures",
    "CapacitySummary",
    "Ledger",
    "LedgerUpdate",
    "allocation_memory",
    "apply_allocation",
    "apply_release",
    "capacity_summary",
    "gpu_figures",
]

_ZERO = Decimal(0)


class Ledger(BaseModel):
    """Live allocations by id, plus ids already released (so a late replay cannot resurrect them)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    allocations: dict[str, Allocation] = {}
    released: frozenset[str] = frozenset()

    def on_gpu(self, gpu_uuid: str) -> tuple[Allocation, ...]:
        return tuple(a for a in self.allocations.values() if a.gpu_uuid == gpu_uuid)


class LedgerUpdate(BaseModel):
    """The ledger after an event, and whether the event changed anything."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ledger: Ledger
    changed: bool


def apply_allocation(*, ledger: Ledger, allocation: Allocation) -> LedgerUpdate:
    """Record an allocation once; a replay is a no-op, a different body under the same id is refused."""
    known = ledger.allocations.get(allocation.allocation_id)
    if known is not None and known != allocation:
        raise AllocationConflictError(
            f"allocation {allocation.allocation_id} already exists with other content"
        )
    if known is not None or allocation.allocation_id in ledger.released:
        return LedgerUpdate(ledger=ledger, changed=False)
    allocations = {**ledger.allocations, allocation.allocation_id: allocation}
    return LedgerUpdate(ledger=ledger.model_copy(update={"allocations": allocations}), changed=True)


def apply_release(*, ledger: Ledger, allocation_id: str) -> LedgerUpdate:
    """Release an allocation once; releasing an unknown or released id is a no-op."""
    if allocation_id in ledger.released:
        return LedgerUpdate(ledger=ledger, changed=False)
    allocations = {k: v for k, v in ledger.allocations.items() if k != allocation_id}
    # Remember the id even if its allocation never arrived: events may come out of order.
    released = ledger.released | {allocation_id}
    update = {"allocations": allocations, "released": released}
    return LedgerUpdate(ledger=ledger.model_copy(update=update), changed=allocation_id in ledger.allocations)


@dataclass(frozen=True, slots=True, kw_only=True)
class CapacityFigures:
    """One progress bar's numbers; `fragmented_units` is free capacity on GPUs already partly in use."""

    total_units: Decimal = _ZERO
    allocated_units: Decimal = _ZERO
    free_units: Decimal = _ZERO
    unavailable_units: Decimal = _ZERO
    fragmented_units: Decimal = _ZERO
    total_gpus: int = 0
    in_use_gpus: int = 0
    free_gpus: int = 0
    unavailable_gpus: int = 0
    total_memory_mib: int = 0
    allocated_memory_mib: int = 0
    free_memory_mib: int = 0

    def __add__(self, other: CapacityFigures) -> CapacityFigures:
        return CapacityFigures(
            **{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)}
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class CapacitySummary:
    """Capacity of the whole pool and per pool, zone, node, model and GPU."""

    total: CapacityFigures
    by_pool: dict[str, CapacityFigures] = field(default_factory=dict)
    by_zone: dict[str, CapacityFigures] = field(default_factory=dict)
    by_node: dict[str, CapacityFigures] = field(default_factory=dict)
    by_model: dict[str, CapacityFigures] = field(default_factory=dict)
    by_gpu: dict[str, CapacityFigures] = field(default_factory=dict)


def allocation_memory(gpu: Gpu, partition_id: str | None) -> tuple[int, bool]:
    """Memory (MiB) an allocation holds, and whether it is isolated from the GPU's other holders.

    One of the GPU's partitions: its memory (a MIG instance, isolated). A share of a time-sliced GPU
    (the scheduler names it by its own slot id): the GPU's memory / ratio, not isolated, since
    time-slicing (without MPS) fences nothing. Otherwise the whole GPU. The allocation ledger's SQL
    (adapters/node_store.py, SELECT_MEMORY_OF) says the same.
    """
    ratio = gpu.time_slice.ratio if gpu.time_slice else 1
    part = next((p for p in gpu.partitions if p.id == partition_id), None)
    if part is not None:
        return part.memory_mib, part.kind is not PartitionKind.TIME_SLICE
    if partition_id is not None and ratio > 1:
        return gpu.memory_mib // ratio, False
    return gpu.memory_mib, True


def _allocated_memory(gpu: Gpu, allocations: tuple[Allocation, ...]) -> int:
    used = sum(allocation_memory(gpu, a.partition_id)[0] for a in allocations)
    return min(used, gpu.memory_mib)


def gpu_figures(*, gpu: Gpu, node: Node, allocations: tuple[Allocation, ...]) -> CapacityFigures:
    """Figures of one GPU; a draining or failed GPU, or one on a node not ready, offers nothing."""
    available = gpu_offers_capacity(gpu.health) and node_offers_capacity(node.status)
    allocated = sum((a.units for a in allocations), _ZERO)
    spare = max(gpu.capacity_units - allocated, _ZERO)
    memory = _allocated_memory(gpu, allocations)
    free = spare if available else _ZERO
    return CapacityFigures(
        total_units=gpu.capacity_units,
        allocated_units=allocated,
        free_units=free,
        unavailable_units=_ZERO if available else spare,
        fragmented_units=free if allocations else _ZERO,
        total_gpus=1,
        in_use_gpus=1 if allocations else 0,
        free_gpus=1 if available and not allocations else 0,
        unavailable_gpus=0 if available else 1,
        total_memory_mib=gpu.memory_mib,
        allocated_memory_mib=memory,
        free_memory_mib=gpu.memory_mib - memory if available else 0,
    )


_GROUPS: dict[str, Callable[[Node, Gpu], str]] = {
    "by_pool": lambda node, _: node.labels.pool,
    "by_zone": lambda node, _: node.labels.zone,
    "by_node": lambda node, _: node.hostname,
    "by_model": lambda _, gpu: gpu.model,
    "by_gpu": lambda _, gpu: gpu.uuid,
}


def capacity_summary(*, inventories: Iterable[NodeInventory], ledger: Ledger) -> CapacitySummary:
    """Aggregate every GPU's figures into the pool total and each grouping."""
    per_gpu: dict[str, list[Allocation]] = defaultdict(list)
    for allocation in ledger.allocations.values():
        per_gpu[allocation.gpu_uuid].append(allocation)
    groups: dict[str, dict[str, CapacityFigures]] = {name: {} for name in _GROUPS}
    total = CapacityFigures()
    for inventory in inventories:
        for gpu in inventory.gpus:
            figures = gpu_figures(gpu=gpu, node=inventory.node, allocations=tuple(per_gpu[gpu.uuid]))
            total += figures
            for name, key_of in _GROUPS.items():
                key = key_of(inventory.node, gpu)
                groups[name][key] = groups[name].get(key, CapacityFigures()) + figures
    return CapacitySummary(total=total, **groups)
