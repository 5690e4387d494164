"""An in-memory twin of the Store's allocation ledger for unit tests: no database."""

from __future__ import annotations

from datetime import datetime

from services.inventory.adapters.node_store import AllocationRow

__all__ = ["FakeNodeStore"]


class FakeNodeStore:
    """Allocations by id and the placements already released, as the Store's ledger keeps them."""

    def __init__(self) -> None:
        self.allocations: dict[str, tuple[AllocationRow, datetime]] = {}
        self.released: dict[str, datetime] = {}
        self._released_rows: set[str] = set()

    async def placement_released(self, *, placement_id: str) -> bool:
        """Whether the placement has already ended."""
        return placement_id in self.released

    async def add_allocation(self, *, row: AllocationRow, at: datetime) -> bool:
        """Record an allocation once; False when its id was already in the ledger."""
        if row.allocation_id in self.allocations:
            return False
        self.allocations[row.allocation_id] = (row, at)
        return True

    async def move_allocation(self, *, old_id: str, row: AllocationRow) -> bool:
        """Move a live allocation onto the row's GPU or instance, keeping when it began (and its place in
        the order); False when it is not live or the row's id is recorded already."""
        if (
            old_id not in self.allocations
            or old_id in self._released_rows
            or row.allocation_id in self.allocations
        ):
            return False
        self.allocations = {
            (row.allocation_id if key == old_id else key): ((row, at) if key == old_id else (kept, at))
            for key, (kept, at) in self.allocations.items()
        }
        return True

    async def release_placement(self, *, placement_id: str, at: datetime) -> list[str]:
        """Release every allocation of the placement; returns the GPUs freed (empty on a replay)."""
        freed = {
            row.gpu_uuid
            for key, (row, _) in self.allocations.items()
            if row.placement_id == placement_id and key not in self._released_rows
        }
        self._released_rows.update(
            key for key, (row, _) in self.allocations.items() if row.placement_id == placement_id
        )
        self.released.setdefault(placement_id, at)
        return sorted(freed)

    def live(self) -> list[AllocationRow]:
        """Allocations not released, in the order they were recorded."""
        return [row for key, (row, _) in self.allocations.items() if key not in self._released_rows]
