"""Inventory's unit of work: one transaction and the stores that write inside it.

Use cases and handlers take ``InventoryUnitOfWork`` and reach their stores as ``uow.nodes`` and
``uow.ledger``; ``adapters/unit_of_work.py`` opens the Postgres one, ``adapters/unit_of_work_fake.py`` the
in-memory one a unit test passes (its ledger a fake held to the real one by a contract test).
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from libs.common.db.uow import UnitOfWork
from libs.common.runtime import ServiceRuntime
from services.inventory.adapters.node_store import AllocationRow, Store
from services.inventory.adapters.unit_of_work import PostgresInventoryUnitOfWork

__all__ = ["AllocationLedger", "InventoryUnitOfWork", "inventory_uow"]


class AllocationLedger(Protocol):
    """The allocation ledger the handlers keep (Store; FakeNodeStore in unit tests)."""

    async def placement_released(self, *, placement_id: str) -> bool: ...

    async def add_allocation(self, *, row: AllocationRow, at: datetime) -> bool: ...

    async def move_allocation(self, *, old_id: str, row: AllocationRow) -> bool: ...

    async def release_placement(self, *, placement_id: str, at: datetime) -> list[str]: ...


class InventoryUnitOfWork(UnitOfWork, Protocol):
    """A transaction of inventory's schema, with its stores on the same connection."""

    @property
    def nodes(self) -> Store:
        """Nodes, GPUs, partitions and health history."""
        ...

    @property
    def ledger(self) -> AllocationLedger:
        """The allocation ledger (the writes the handlers make)."""
        ...


def inventory_uow(runtime: ServiceRuntime) -> PostgresInventoryUnitOfWork:
    """A new unit of work on the runtime's pool, with inventory's stores."""
    return PostgresInventoryUnitOfWork(pool=runtime.pool, source=runtime.settings.service_name)
