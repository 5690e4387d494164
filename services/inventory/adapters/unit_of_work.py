"""Inventory's Postgres unit of work: the platform's transaction with inventory's stores on it."""

from __future__ import annotations

from libs.common.db.uow import PostgresUnitOfWork
from services.inventory.adapters.node_store import Store

__all__ = ["PostgresInventoryUnitOfWork"]


class PostgresInventoryUnitOfWork(PostgresUnitOfWork):
    """Each store is built on the transaction's connection when first asked for (so only inside the block)."""

    @property
    def nodes(self) -> Store:
        return Store(self.conn)

    @property
    def ledger(self) -> Store:
        return Store(self.conn)
