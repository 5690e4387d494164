"""Telemetry's Postgres unit of work: the platform's transaction with telemetry's stores on it."""

from __future__ import annotations

from libs.common.db.uow import PostgresUnitOfWork
from services.telemetry.adapters.allocation_store import AllocationStore
from services.telemetry.adapters.rollup_store import RollupStore

__all__ = ["PostgresTelemetryUnitOfWork"]


class PostgresTelemetryUnitOfWork(PostgresUnitOfWork):
    """Each store is built on the transaction's connection when first asked for (so only inside the block)."""

    @property
    def allocations(self) -> AllocationStore:
        return AllocationStore(self.conn)

    @property
    def rollups(self) -> RollupStore:
        return RollupStore(self.conn)
