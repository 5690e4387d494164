"""Telemetry's unit of work for unit tests: in-memory events and allocations, rolled back unless committed.

The allocations are a ``FakeAllocationStore`` (held to ``AllocationStore`` by tests/integration/telemetry/
test_allocation_store_contract.py). The rollup store is SQL only: asked for without a connection it
raises.
"""

from __future__ import annotations

from typing import Any

from libs.common.testing import FakeUnitOfWork
from services.telemetry.adapters.allocation_store_fake import FakeAllocationStore
from services.telemetry.adapters.rollup_store import RollupStore

__all__ = ["FakeTelemetryUnitOfWork"]


class FakeTelemetryUnitOfWork(FakeUnitOfWork):
    """Events and allocations in memory; ``allocations`` keeps what committed blocks wrote."""

    def __init__(self, allocations: FakeAllocationStore | None = None, *, conn: Any = None) -> None:
        self.allocations = allocations or FakeAllocationStore()
        super().__init__(conn, tracked=[self.allocations])

    @property
    def rollups(self) -> RollupStore:
        return RollupStore(self.conn)
