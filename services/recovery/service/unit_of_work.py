"""Recovery's unit of work: one transaction and the stores that write inside it.

Handlers, the transition effects and the tick take ``RecoveryUnitOfWork`` and reach their stores as
``uow.placements`` and ``uow.incidents``; ``adapters/unit_of_work.py`` opens the Postgres one,
``adapters/unit_of_work_fake.py`` the in-memory one a unit test passes (its placement map a fake held to
the real one by a contract test).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Protocol

from libs.common.db.uow import UnitOfWork
from libs.common.runtime import ServiceRuntime
from services.recovery.adapters.unit_of_work import PostgresRecoveryUnitOfWork
from services.recovery.domain.incidents import Incident, IncidentState
from services.recovery.domain.placements import Placement

__all__ = ["IncidentBook", "PlacementMap", "RecoveryUnitOfWork", "recovery_uow"]


class PlacementMap(Protocol):
    """The placement map and GPU health the handlers keep (PlacementStore; FakePlacementStore in tests)."""

    async def place(self, p: Placement, *, priority: float) -> None: ...

    async def move(self, *, workload_id: str, placement_id: str, gpus: Sequence[str]) -> Placement | None: ...

    async def end(self, *, workload_id: str, placement_id: str) -> None: ...

    async def on_gpu(self, gpu: str) -> list[Placement]: ...

    async def on_node(self, node: str) -> list[Placement]: ...

    async def of(self, workload_ids: Sequence[str]) -> dict[str, Placement]: ...

    async def set_health(self, *, gpu: str, node: str, health: str) -> None: ...

    async def health_of(self, gpus: Sequence[str]) -> dict[str, str]: ...

    async def out_of_service_on_node(self, node: str) -> list[str]: ...


class IncidentBook(Protocol):
    """The incidents the use cases save and read locked (IncidentStore; FakeIncidentStore in tests)."""

    async def save(
        self, incident: Incident, *, tenants: Mapping[str, str], settle_until: datetime | None = None
    ) -> None: ...

    async def lock_node(self, node: str) -> None: ...

    async def get(self, incident_id: str) -> Incident | None: ...

    async def recent_on_node(self, node: str, *, since: datetime) -> list[Incident]: ...

    async def open_in_state(self, node: str, *states: IncidentState) -> list[Incident]: ...

    async def escalated_on_node(self, node: str, *, limit: int = 100) -> list[Incident]: ...

    async def held_gpus(self, node: str, *, other_than: str) -> set[str]: ...

    async def others_holding_gpu(self, gpu_uuid: str, *, other_than: str, since: datetime) -> list[str]: ...

    async def migrating_for(self, workload_id: str) -> list[Incident]: ...

    async def due_deadline(self, *, detected_before: datetime, limit: int = 200) -> list[Incident]: ...

    async def due_settle(self, *, now: datetime, limit: int = 200) -> list[Incident]: ...


class RecoveryUnitOfWork(UnitOfWork, Protocol):
    """A transaction of recovery's schema, with its stores on the same connection."""

    @property
    def placements(self) -> PlacementMap:
        """Where workloads run and the GPUs' health, as the other services reported them."""
        ...

    @property
    def incidents(self) -> IncidentBook:
        """Incidents and their history."""
        ...


def recovery_uow(runtime: ServiceRuntime) -> PostgresRecoveryUnitOfWork:
    """A new unit of work on the runtime's pool, with recovery's stores."""
    return PostgresRecoveryUnitOfWork(pool=runtime.pool, source=runtime.settings.service_name)
