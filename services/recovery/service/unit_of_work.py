"""Recovery's unit of work: one transaction and the stores that write inside it.

Handlers, the transition effects and the tick take ``RecoveryUnitOfWork`` and reach their stores as
``uow.placements`` and ``uow.incidents``; ``adapters/unit_of_work.py`` opens the Postgres one,
``adapters/unit_of_work_fake.py`` the in-memory one a unit test passes (its placement map a fake held to
the real one by a contract test).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from libs.common.db.uow import UnitOfWork
from libs.common.runtime import ServiceRuntime
from services.recovery.adapters.incident_store import IncidentStore
from services.recovery.adapters.unit_of_work import PostgresRecoveryUnitOfWork
from services.recovery.domain.placements import Placement

__all__ = ["PlacementMap", "RecoveryUnitOfWork", "recovery_uow"]


class PlacementMap(Protocol):
    """The placement map and GPU health the handlers keep (PlacementStore; FakePlacementStore in tests)."""

    async def place(self, p: Placement, *, priority: float) -> None: ...

    async def end(self, *, workload_id: str, placement_id: str) -> None: ...

    async def on_gpu(self, gpu: str) -> list[Placement]: ...

    async def on_node(self, node: str) -> list[Placement]: ...

    async def of(self, workload_ids: Sequence[str]) -> dict[str, Placement]: ...

    async def set_health(self, *, gpu: str, node: str, health: str) -> None: ...

    async def health_of(self, gpus: Sequence[str]) -> dict[str, str]: ...

    async def out_of_service_on_node(self, node: str) -> list[str]: ...


class RecoveryUnitOfWork(UnitOfWork, Protocol):
    """A transaction of recovery's schema, with its stores on the same connection."""

    @property
    def placements(self) -> PlacementMap:
        """Where workloads run and the GPUs' health, as the other services reported them."""
        ...

    @property
    def incidents(self) -> IncidentStore:
        """Incidents and their history."""
        ...


def recovery_uow(runtime: ServiceRuntime) -> PostgresRecoveryUnitOfWork:
    """A new unit of work on the runtime's pool, with recovery's stores."""
    return PostgresRecoveryUnitOfWork(pool=runtime.pool, source=runtime.settings.service_name)
