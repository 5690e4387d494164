"""Telemetry's unit of work: one transaction and the stores that write inside it.

Handlers and the rollup writer take ``TelemetryUnitOfWork`` and reach their stores as ``uow.allocations``
and ``uow.rollups``; ``adapters/unit_of_work.py`` opens the Postgres one, ``adapters/unit_of_work_fake.py``
the in-memory one a unit test passes (its allocations a fake held to the real one by a contract test).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from libs.common.db.uow import UnitOfWork
from libs.common.runtime import ServiceRuntime
from services.telemetry.adapters.rollup_store import RollupStore
from services.telemetry.adapters.unit_of_work import PostgresTelemetryUnitOfWork

__all__ = ["AllocationWriter", "TelemetryUnitOfWork", "telemetry_uow"]


class AllocationWriter(Protocol):
    """The allocation writes the handlers make (AllocationStore; FakeAllocationStore in unit tests)."""

    async def add_allocations(
        self,
        *,
        placement_id: str,
        workload_id: str,
        tenant_id: str,
        node: str,
        placed_at: datetime,
        gpus: Sequence[str],
    ) -> None: ...

    async def move_placement(self, *, placement_id: str, gpus: Sequence[str]) -> None: ...

    async def remove_placement(self, *, placement_id: str) -> None: ...


class TelemetryUnitOfWork(UnitOfWork, Protocol):
    """A transaction of telemetry's schema, with its stores on the same connection."""

    @property
    def allocations(self) -> AllocationWriter:
        """Who holds which GPU (the writes the handlers make)."""
        ...

    @property
    def rollups(self) -> RollupStore:
        """Closed rollup windows."""
        ...


def telemetry_uow(runtime: ServiceRuntime) -> PostgresTelemetryUnitOfWork:
    """A new unit of work on the runtime's pool, with telemetry's stores."""
    return PostgresTelemetryUnitOfWork(pool=runtime.pool, source=runtime.settings.service_name)
