"""Rows to domain objects: the GPU view, stored grants, live allocations, waiting workloads, quota limits."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from services.scheduler.domain.cluster import Allocation, GpuView, Grant, MigPartition, SlotKind
from services.scheduler.domain.creation import CreationSpec, to_workload
from services.scheduler.domain.model import Workload, WorkloadState
from services.scheduler.domain.quota import QuotaLimits, QuotaUsage, demand_of

__all__ = [
    "allocation_of",
    "demand_of_grants",
    "gpu_view",
    "grant_of",
    "limits_of",
    "workload_of",
]

_GIB = 1024**3


def gpu_view(row: Mapping[str, Any], *, avoid: frozenset[str] = frozenset()) -> GpuView:
    """A GPU row as the placement core sees it; GPUs to avoid count as unhealthy."""
    parts = tuple(
        MigPartition(p["partition_id"], p["profile"], float(p["units"]))
        for p in row["partitions"]
        if p.get("kind") == "mig" and p.get("profile")
    )
    return GpuView(
        uuid=row["gpu_uuid"],
        node=row["node"],
        model=row["model"],
        memory_gb=round(int(row["memory_bytes"]) / _GIB),
        units=float(row["units"]),
        healthy=row["health"] == "healthy" and row["gpu_uuid"] not in avoid,
        labels=dict(row["labels"]),
        partitions=parts,
        timeslice_ratio=max(int(row["time_slice_ratio"]), 1),
    )


def grant_of(raw: Mapping[str, Any]) -> Grant:
    """A stored grant."""
    return Grant(raw["gpu"], raw["node"], raw["slot"], float(raw["units"]), SlotKind(raw["kind"]))


def allocation_of(row: Mapping[str, Any]) -> Allocation:
    """A live placement as the placement core sees it."""
    return Allocation(
        workload_id=row["workload_id"],
        tenant=row["tenant_id"],
        grants=tuple(grant_of(g) for g in row["grants"]),
        priority=float(row["priority"]),
        preemptible=bool(row["preemptible"]),
        ends_at=row["ends_at"],
        preempt_deadline=row["preempt_deadline"],
    )


def demand_of_grants(grants: Iterable[Grant]) -> QuotaUsage:
    """The quota demand of a placement: whole GPUs, units and one workload."""
    held = list(grants)
    whole = sum(1 for g in held if g.kind is SlotKind.WHOLE)
    return demand_of(gpus=whole, units=sum(g.units for g in held))


def workload_of(row: Mapping[str, Any]) -> Workload:
    """A workload row as the placement core sees it."""
    spec = CreationSpec.model_validate(row["spec"])
    workload = to_workload(
        spec, workload_id=row["workload_id"], tenant=row["tenant_id"], now=row["submitted_at"]
    )
    return workload.model_copy(update={"state": WorkloadState(row["state"])})


def limits_of(row: Mapping[str, Any]) -> QuotaLimits:
    """A quota row as limits."""
    return QuotaLimits(gpus=row["gpus"], units_milli=row["units_milli"], workloads=row["workloads"])
