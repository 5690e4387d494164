"""Telemetry's allocations table: who holds which GPU. Never commits (the unit of work does)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg

from services.telemetry.domain.allocations import AllocationRow

__all__ = ["AllocationStore"]

INSERT_ALLOCATION = """
INSERT INTO allocations (placement_id, gpu_uuid, workload_id, tenant_id, node, placed_at)
SELECT $1, g, $2, $3, $4, $5 FROM unnest($6::text[]) AS g
ON CONFLICT (placement_id, gpu_uuid) DO NOTHING
"""
#: A live placement's GPUs replaced (the host gave it others), each kept with when the placement was placed;
#: a placement with no rows (ended, or never seen) stays without.
MOVE_PLACEMENT = """
WITH held AS (
    SELECT workload_id, tenant_id, node, min(placed_at) AS placed_at FROM allocations WHERE placement_id = $1
    GROUP BY workload_id, tenant_id, node
), gone AS (
    DELETE FROM allocations WHERE placement_id = $1 AND NOT (gpu_uuid = ANY($2::text[]))
)
INSERT INTO allocations (placement_id, gpu_uuid, workload_id, tenant_id, node, placed_at)
SELECT $1, g, h.workload_id, h.tenant_id, h.node, h.placed_at FROM held h, unnest($2::text[]) AS g
ON CONFLICT (placement_id, gpu_uuid) DO NOTHING
"""
DELETE_PLACEMENT = "DELETE FROM allocations WHERE placement_id = $1"
ALL_ALLOCATIONS = "SELECT gpu_uuid, workload_id, tenant_id, node FROM allocations ORDER BY placed_at"


class AllocationStore:
    """Allocation SQL on one connection (inside a unit of work, or the pool for reads)."""

    def __init__(self, conn: asyncpg.Connection[Any] | asyncpg.Pool[Any]) -> None:
        self._conn = conn

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
        """Record the GPUs a placement holds (a redelivered placement changes nothing)."""
        await self._conn.execute(
            INSERT_ALLOCATION, placement_id, workload_id, tenant_id, node, placed_at, list(gpus)
        )

    async def move_placement(self, *, placement_id: str, gpus: Sequence[str]) -> None:
        """Replace the GPUs a recorded placement holds, keeping when it was placed."""
        await self._conn.execute(MOVE_PLACEMENT, placement_id, list(gpus))

    async def remove_placement(self, *, placement_id: str) -> None:
        """Forget the GPUs a placement held."""
        await self._conn.execute(DELETE_PLACEMENT, placement_id)

    async def allocations(self) -> list[AllocationRow]:
        """Every current allocation, oldest first."""
        rows = await self._conn.fetch(ALL_ALLOCATIONS)
        return [AllocationRow(r["gpu_uuid"], r["workload_id"], r["tenant_id"], r["node"]) for r in rows]
