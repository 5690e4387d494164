"""The scheduler's unit of work: one transaction and the stores that write inside it.

Use cases and handlers take ``SchedulerUnitOfWork`` and reach their stores as ``uow.workloads``,
``uow.fleet``, ...; ``adapters/unit_of_work.py`` opens the Postgres one, ``adapters/unit_of_work_fake.py``
the in-memory one a unit test passes (its fleet and workload stores fakes held to the real ones by contract
tests).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from libs.common.db.uow import OutboxRow, UnitOfWork
from services.scheduler.adapters.draft_store import DraftStore
from services.scheduler.adapters.tenant_store import TenantStore
from services.scheduler.domain.stored import (
    RunEnd,
    RunExit,
    RunHost,
    RunStart,
    StoredGpu,
    StoredPlacement,
    StoredWorkload,
)

__all__ = ["FleetWrites", "SchedulerUnitOfWork", "WorkloadWrites"]


class FleetWrites(Protocol):
    """The fleet and fair-share writes the handlers make (FleetStore; FakeFleetStore in unit tests)."""

    async def upsert_gpu(self, *, row: dict[str, Any]) -> None: ...

    async def set_partitions(
        self, gpu_uuid: str, *, mig_enabled: bool, ratio: int, partitions: list[dict[str, Any]]
    ) -> None: ...

    async def set_health(self, gpu_uuid: str, *, health: str) -> None: ...

    async def node_gpus(self, node: str) -> list[StoredGpu]: ...

    async def wake_placer(self) -> None: ...

    async def set_usage(self, tenant: str, *, value: float, as_of: datetime) -> None: ...

    async def add_stop(self, *, tenant: str, project: str, month: str, reason: str) -> None: ...


class WorkloadWrites(Protocol):
    """The workload, placement and run statements made through the unit of work (WorkloadStore;
    FakeWorkloadStore in unit tests). The placer's batch and the API's reads use WorkloadStore itself."""

    async def submit(self, *, row: dict[str, Any], outbox: Sequence[OutboxRow]) -> StoredWorkload: ...

    async def lock_workload(self, workload_id: str) -> StoredWorkload | None: ...

    async def count_waiting(self) -> int: ...

    async def set_state(
        self, workload_id: str, *, state: str, placement_id: str | None, priority: float | None = None
    ) -> None: ...

    async def end_workload(
        self, workload_id: str, *, state: str, outcome: str, reason: str, at: datetime
    ) -> None: ...

    async def start_migration(self, workload_id: str, *, priority: float, avoid_gpu: str) -> None: ...

    async def insert_placement(self, *, row: dict[str, Any], slots: Sequence[tuple[str, str]]) -> None: ...

    async def placement(self, placement_id: str) -> StoredPlacement | None: ...

    async def live_placement_of(self, workload_id: str) -> str | None: ...

    async def end_placement(
        self, placement_id: str, *, outcome: str, at: datetime, released: bool = False
    ) -> StoredPlacement | None: ...

    async def live_placements_on(self, node: str) -> list[StoredPlacement]: ...

    async def regrant(self, grants: Mapping[str, Sequence[Mapping[str, Any]]]) -> None: ...

    async def mark_migrating(self, placement_id: str) -> None: ...

    async def schedule_preemption(
        self, placement_id: str, *, deadline: datetime, preempted_for: str
    ) -> StoredPlacement | None: ...

    async def start_run(
        self, workload_id: str, *, placement_id: str, at: datetime, host: RunHost | None = None
    ) -> RunStart | None: ...

    async def end_run(
        self,
        workload_id: str,
        *,
        placement_id: str,
        outcome: str,
        reason: str,
        at: datetime,
        exit_facts: RunExit | None = None,
    ) -> RunEnd | None: ...

    async def record_exit(self, workload_id: str, *, placement_id: str, exit_facts: RunExit) -> bool: ...

    async def wake_placer(self) -> None: ...


class SchedulerUnitOfWork(UnitOfWork, Protocol):
    """A transaction of the scheduler's schema, with its stores on the same connection."""

    @property
    def workloads(self) -> WorkloadWrites:
        """Workloads, placements and runs (the statements made inside a unit of work)."""
        ...

    @property
    def fleet(self) -> FleetWrites:
        """The GPU view and tenant policy (the writes the handlers make)."""
        ...

    @property
    def drafts(self) -> DraftStore:
        """Creation drafts."""
        ...

    @property
    def tenants(self) -> TenantStore:
        """Tenants and their API keys."""
        ...
