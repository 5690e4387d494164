"""Recovery's Postgres unit of work: the platform's transaction with recovery's stores on it."""

from __future__ import annotations

from libs.common.db.uow import PostgresUnitOfWork
from services.recovery.adapters.incident_store import IncidentStore
from services.recovery.adapters.placement_store import PlacementStore

__all__ = ["PostgresRecoveryUnitOfWork"]


class PostgresRecoveryUnitOfWork(PostgresUnitOfWork):
    """Each store is built on the transaction's connection when first asked for (so only inside the block)."""

    @property
    def placements(self) -> PlacementStore:
        return PlacementStore(self.conn)

    @property
    def incidents(self) -> IncidentStore:
        return IncidentStore(self.conn)
