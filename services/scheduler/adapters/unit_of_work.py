"""The scheduler's Postgres unit of work: the platform's transaction with the scheduler's stores on it."""

from __future__ import annotations

from libs.common.db.uow import OnConnection, PostgresUnitOfWork
from services.scheduler.adapters.draft_store import DraftStore
from services.scheduler.adapters.fleet_store import FleetStore
from services.scheduler.adapters.tenant_store import TenantStore
from services.scheduler.adapters.workload_store import WorkloadStore

__all__ = ["PostgresSchedulerUnitOfWork", "SqlOnlyStores"]


class SqlOnlyStores:
    """The stores without a fake, on the unit of work's connection: shared by the Postgres unit of work
    and the fake one (whose ``conn`` raises unless a test gave it one)."""

    @property
    def drafts(self: OnConnection) -> DraftStore:
        return DraftStore(self.conn)

    @property
    def tenants(self: OnConnection) -> TenantStore:
        return TenantStore(self.conn)


class PostgresSchedulerUnitOfWork(PostgresUnitOfWork, SqlOnlyStores):
    """Each store is built on the transaction's connection when first asked for (so only inside the block)."""

    @property
    def workloads(self) -> WorkloadStore:
        return WorkloadStore(self.conn)

    @property
    def fleet(self) -> FleetStore:
        return FleetStore(self.conn)
