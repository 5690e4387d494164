"""Stored records to the placement core's objects: the GPU view, grants, allocations, workloads, limits."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from services.scheduler.domain.cluster import Allocation, GpuView, Grant, MigPartition, SlotKind
from services.scheduler.domain.creation import CreationSpec, to_workload
from services.scheduler.domain.model import Workload, WorkloadState
from services.scheduler.domain.quota import QuotaLimits, QuotaUsage, demand_of
from services.scheduler.domain.stored import StoredGpu, StoredPlacement, StoredQuota, StoredWorkload

__all__ = [
    "allocation_of",
    "demand_of_grants",
    "gpu_view",
    "grant_of",
    "limits_of",
    "workload_of",
]

_GIB = 1024**3


def gpu_view(gpu: StoredGpu, *, avoid: frozenset[str] = frozenset()) -> GpuView:
    """A GPU as the placement core sees it; GPUs to avoid count as unhealthy."""
    parts = tuple(
        MigPartition(
            p["partition_id"],
            p["profile"],
            float(p["units"]),
            _bytes_or_none(p.get("memory_bytes")),
            p.get("device_uuid") or None,
        )
        for p in gpu.partitions
        if p.get("kind") == "mig" and p.get("profile")
    )
    return GpuView(
        uuid=gpu.gpu_uuid,
        node=gpu.node,
        model=gpu.model,
        memory_gb=round(int(gpu.memory_bytes) / _GIB),
        units=float(gpu.units),
        healthy=gpu.health == "healthy" and gpu.gpu_uuid not in avoid,
        labels=dict(gpu.labels),
        partitions=parts,
        timeslice_ratio=max(int(gpu.time_slice_ratio), 1),
        memory_bytes=int(gpu.memory_bytes),
    )


def _bytes_or_none(value: Any) -> int | None:
    return int(value) if value else None


def grant_of(raw: Mapping[str, Any]) -> Grant:
    """A stored grant."""
    return Grant(raw["gpu"], raw["node"], raw["slot"], float(raw["units"]), SlotKind(raw["kind"]))


def allocation_of(placement: StoredPlacement) -> Allocation:
    """A live placement as the placement core sees it."""
    return Allocation(
        workload_id=placement.workload_id,
        tenant=placement.tenant_id,
        grants=tuple(grant_of(g) for g in placement.grants),
        priority=float(placement.priority),
        preemptible=bool(placement.preemptible),
        ends_at=placement.ends_at,
        preempt_deadline=placement.preempt_deadline,
    )


def demand_of_grants(grants: Iterable[Grant]) -> QuotaUsage:
    """The quota demand of a placement: whole GPUs, units and one workload."""
    held = list(grants)
    whole = sum(1 for g in held if g.kind is SlotKind.WHOLE)
    return demand_of(gpus=whole, units=sum(g.units for g in held))


def workload_of(stored: StoredWorkload) -> Workload:
    """A stored workload as the placement core sees it."""
    spec = CreationSpec.model_validate(stored.spec)
    workload = to_workload(
        spec, workload_id=stored.workload_id, tenant=stored.tenant_id, now=stored.submitted_at
    )
    return workload.model_copy(update={"state": WorkloadState(stored.state)})


def limits_of(quota: StoredQuota) -> QuotaLimits:
    """A stored quota as limits."""
    return QuotaLimits(gpus=quota.gpus, units_milli=quota.units_milli, workloads=quota.workloads)
