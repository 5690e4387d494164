"""An in-memory twin of AllocationStore for unit tests: the same rows, no database."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from services.telemetry.domain.allocations import AllocationRow

__all__ = ["FakeAllocationStore"]


class FakeAllocationStore:
    """Allocations by (placement, GPU), oldest first; a redelivered placement changes nothing."""

    def __init__(self) -> None:
        self._rows: dict[tuple[str, str], tuple[datetime, AllocationRow]] = {}

    async def add_allocations(
        self,
        *,
        placement_id: str,
        workload_id: str,
        tenant_id: str,
        node: str,
        placed_at: datetime,
        gpus: Sequence[str],
    ) -> None:
        """Record the GPUs a placement holds, keeping rows already there."""
        for gpu in gpus:
            row = AllocationRow(gpu, workload_id, tenant_id, node)
            self._rows.setdefault((placement_id, gpu), (placed_at, row))

    async def move_placement(self, *, placement_id: str, gpus: Sequence[str]) -> None:
        """Replace the GPUs a recorded placement holds, keeping when it was placed."""
        held = [value for key, value in self._rows.items() if key[0] == placement_id]
        if not held:
            return
        placed_at, first = min(held, key=lambda value: value[0])
        self._rows = {
            key: value for key, value in self._rows.items() if key[0] != placement_id or key[1] in gpus
        }
        for gpu in gpus:
            row = AllocationRow(gpu, first.workload_id, first.tenant_id, first.node)
            self._rows.setdefault((placement_id, gpu), (placed_at, row))

    async def remove_placement(self, *, placement_id: str) -> None:
        """Forget the GPUs a placement held."""
        self._rows = {key: value for key, value in self._rows.items() if key[0] != placement_id}

    async def allocations(self) -> list[AllocationRow]:
        """Every current allocation, oldest first."""
        return [row for _, row in sorted(self._rows.values(), key=lambda value: value[0])]
