"""Alerting's Postgres unit of work: the platform's transaction with alerting's stores on it."""

from __future__ import annotations

from libs.common.db.uow import OnConnection, PostgresUnitOfWork
from services.alerting.adapters.config_store import ConfigStore
from services.alerting.adapters.delivery_store import DeliveryStore
from services.alerting.adapters.engine_state_store import StateStore

__all__ = ["PostgresAlertingUnitOfWork", "SqlOnlyStores"]


class SqlOnlyStores:
    """The stores without a fake, on the unit of work's connection: shared by the Postgres unit of work
    and the fake one (whose ``conn`` raises unless a test gave it one)."""

    @property
    def state(self: OnConnection) -> StateStore:
        return StateStore(self.conn)

    @property
    def config(self: OnConnection) -> ConfigStore:
        return ConfigStore(self.conn)

    @property
    def deliveries(self: OnConnection) -> DeliveryStore:
        return DeliveryStore(self.conn)


class PostgresAlertingUnitOfWork(PostgresUnitOfWork, SqlOnlyStores):
    """Each store is built on the transaction's connection when first asked for (so only inside the block)."""

    @property
    def signals(self) -> StateStore:
        return StateStore(self.conn)
