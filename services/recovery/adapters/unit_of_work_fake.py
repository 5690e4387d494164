"""Recovery's unit of work for unit tests: in-memory events, incidents and placement map, rolled back
unless committed.

The placement map is a ``FakePlacementStore`` (held to ``PlacementStore`` by tests/integration/recovery/
test_placement_store_contract.py), the incidents a ``FakeIncidentStore`` (held to ``IncidentStore`` by
test_incident_store_contract.py there).
"""

from __future__ import annotations

from typing import Any

from libs.common.testing import FakeUnitOfWork
from services.recovery.adapters.incident_store_fake import FakeIncidentStore
from services.recovery.adapters.placement_store_fake import FakePlacementStore

__all__ = ["FakeRecoveryUnitOfWork"]


class FakeRecoveryUnitOfWork(FakeUnitOfWork):
    """Events, incidents and the placement map in memory; the stores keep what committed blocks wrote."""

    def __init__(
        self,
        placements: FakePlacementStore | None = None,
        *,
        incidents: FakeIncidentStore | None = None,
        conn: Any = None,
    ) -> None:
        self.placements = placements or FakePlacementStore()
        self.incidents = incidents or FakeIncidentStore()
        super().__init__(conn, tracked=[self.placements, self.incidents])
