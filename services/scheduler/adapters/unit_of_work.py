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
    """Each store is built on the transaction's connection when first asked for (so only inside the block).

    The fleet store is one per transaction: it keeps GPU registrations and the placer's wake-up until the
    commit, which flushes them first (a rolled-back block drops them with the store).
    """

    _fleet: FleetStore | None = None

    @property
    def workloads(self) -> WorkloadStore:
        return WorkloadStore(self.conn)

    @property
    def fleet(self) -> FleetStore:
        conn = self.conn
        if self._fleet is None or self._fleet.conn is not conn:
            self._fleet = FleetStore(conn, in_transaction=True)
        return self._fleet

    async def commit(self) -> None:
        fleet, self._fleet = self._fleet, None
        if fleet is not None and fleet.conn is self.conn:
            await fleet.flush()
        await super().commit()
