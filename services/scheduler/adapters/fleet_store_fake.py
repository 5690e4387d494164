"""An in-memory twin of FleetStore's writes for unit tests: GPUs, tenant usage and budget stops."""

from __future__ import annotations

import copy
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from services.scheduler.domain.stored import StoredGpu

__all__ = ["FakeFleetStore", "Stop"]


@dataclass(frozen=True, slots=True)
class Stop:
    """New work refused for one project in one month, and why."""

    tenant: str
    project: str
    month: str
    reason: str


class FakeFleetStore:
    """Keeps what FleetStore would write, readable as plain attributes."""

    def __init__(self) -> None:
        self.gpus: dict[str, dict[str, Any]] = {}
        self.usage: dict[str, tuple[float, datetime]] = {}
        self.stops: list[Stop] = []
        #: Wake-ups of the placer delivered: one per committed unit of work that asked (as Postgres folds
        #: a transaction's identical NOTIFYs into one), counted by FakeSchedulerUnitOfWork's commit.
        self.wakes = 0
        self.wake_pending = False

    async def upsert_gpu(self, *, row: dict[str, Any]) -> None:
        """Record a GPU's static facts, health and partitions."""
        self.gpus[row["gpu_uuid"]] = dict(row)

    async def set_partitions(
        self, gpu_uuid: str, *, mig_enabled: bool, ratio: int, partitions: list[dict[str, Any]]
    ) -> None:
        """Replace a known GPU's slices."""
        if gpu_uuid in self.gpus:
            self.gpus[gpu_uuid].update(mig_enabled=mig_enabled, time_slice_ratio=ratio, partitions=partitions)

    async def set_health(self, gpu_uuid: str, *, health: str) -> None:
        """Record a known GPU's health."""
        if gpu_uuid in self.gpus:
            self.gpus[gpu_uuid]["health"] = health

    async def node_gpus(self, node: str) -> list[StoredGpu]:
        """The GPUs of one node, in UUID order."""
        rows = sorted((r for r in self.gpus.values() if r["node"] == node), key=lambda r: r["gpu_uuid"])
        return [StoredGpu(*(copy.deepcopy(r[f.name]) for f in fields(StoredGpu))) for r in rows]

    async def wake_placer(self) -> None:
        """Wake the placer when the unit of work commits."""
        self.wake_pending = True

    async def set_usage(self, tenant: str, *, value: float, as_of: datetime) -> None:
        """Replace a tenant's decayed usage."""
        self.usage[tenant] = (value, as_of)

    async def add_stop(self, *, tenant: str, project: str, month: str, reason: str) -> None:
        """Refuse new work for a project this month (once per project and month)."""
        if not any((s.tenant, s.project, s.month) == (tenant, project, month) for s in self.stops):
            self.stops.append(Stop(tenant=tenant, project=project, month=month, reason=reason))
