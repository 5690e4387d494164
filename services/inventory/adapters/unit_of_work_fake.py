"""Inventory's unit of work for unit tests: in-memory events and ledger, rolled back unless committed.

The ledger is a ``FakeNodeStore`` (held to ``Store`` by tests/integration/inventory/
test_node_store_contract.py). The node store is SQL only: asked for without a connection it raises, so a
handler that needs it is tested against Postgres.
"""

from __future__ import annotations

from typing import Any

from libs.common.testing import FakeUnitOfWork
from services.inventory.adapters.node_store import Store
from services.inventory.adapters.node_store_fake import FakeNodeStore

__all__ = ["FakeInventoryUnitOfWork"]


class FakeInventoryUnitOfWork(FakeUnitOfWork):
    """Events and the ledger in memory; ``ledger`` keeps what committed blocks wrote."""

    def __init__(self, ledger: FakeNodeStore | None = None, *, conn: Any = None) -> None:
        self.ledger = ledger or FakeNodeStore()
        super().__init__(conn, tracked=[self.ledger])

    @property
    def nodes(self) -> Store:
        return Store(self.conn)
