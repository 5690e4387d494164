"""Recovery's unit of work for unit tests: in-memory events and placement map, rolled back unless committed.

The placement map is a ``FakePlacementStore`` (held to ``PlacementStore`` by tests/integration/recovery/
test_placement_store_contract.py). The incident store is SQL only: asked for without a connection it
raises, so a handler that needs it is tested against Postgres.
"""

from __future__ import annotations

from typing import Any

from libs.common.testing import FakeUnitOfWork
from services.recovery.adapters.incident_store import IncidentStore
from services.recovery.adapters.placement_store_fake import FakePlacementStore

__all__ = ["FakeRecoveryUnitOfWork"]


class FakeRecoveryUnitOfWork(FakeUnitOfWork):
    """Events and the placement map in memory; ``placements`` keeps what committed blocks wrote."""

    def __init__(self, placements: FakePlacementStore | None = None, *, conn: Any = None) -> None:
        self.placements = placements or FakePlacementStore()
        super().__init__(conn, tracked=[self.placements])

    @property
    def incidents(self) -> IncidentStore:
        return IncidentStore(self.conn)
