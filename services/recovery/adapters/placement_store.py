"""Postgres access to the placement map (scheduler events) and GPU health (inventory). Never commits."""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from services.recovery.adapters._pg import Conn
from services.recovery.domain.placements import Placement

__all__ = ["PlacementStore"]

UPSERT_PLACEMENT = """
INSERT INTO placements (workload_id, tenant_id, placement_id, node, gpus, priority)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (workload_id) DO UPDATE SET tenant_id = EXCLUDED.tenant_id, placement_id = EXCLUDED.placement_id,
    node = EXCLUDED.node, gpus = EXCLUDED.gpus, priority = EXCLUDED.priority, updated_at = now()
"""
MOVE_PLACEMENT = """
UPDATE placements SET gpus = $3, updated_at = now() WHERE workload_id = $1 AND placement_id = $2
RETURNING *
"""
DELETE_PLACEMENT = "DELETE FROM placements WHERE workload_id = $1 AND placement_id = $2"
SELECT_PLACEMENTS_ON_GPU = "SELECT * FROM placements WHERE $1 = ANY (gpus) ORDER BY workload_id"
SELECT_PLACEMENTS_ON_NODE = "SELECT * FROM placements WHERE node = $1 ORDER BY workload_id"
SELECT_PLACEMENTS = "SELECT * FROM placements WHERE workload_id = ANY ($1::text[])"
UPSERT_HEALTH = """
INSERT INTO gpu_health (gpu_uuid, node, health) VALUES ($1, $2, $3)
ON CONFLICT (gpu_uuid) DO UPDATE SET node = EXCLUDED.node, health = EXCLUDED.health, updated_at = now()
"""
SELECT_HEALTH = "SELECT gpu_uuid, health FROM gpu_health WHERE gpu_uuid = ANY ($1::text[])"
SELECT_OUT_OF_SERVICE_ON_NODE = """
SELECT gpu_uuid FROM gpu_health WHERE node = $1 AND health IN ('draining', 'failed') ORDER BY gpu_uuid
"""


def _placement(row: asyncpg.Record) -> Placement:
    return Placement(
        workload_id=row["workload_id"],
        tenant_id=row["tenant_id"],
        placement_id=row["placement_id"],
        node=row["node"],
        gpus=tuple(row["gpus"]),
    )


class PlacementStore:
    """The placement map (from scheduler events) and GPU health (from inventory events)."""

    def __init__(self, conn: Conn) -> None:
        self._conn = conn

    async def place(self, p: Placement, *, priority: float) -> None:
        """Record where a workload runs now (a new placement replaces the old one)."""
        await self._conn.execute(
            UPSERT_PLACEMENT, p.workload_id, p.tenant_id, p.placement_id, p.node, list(p.gpus), priority
        )

    async def move(self, *, workload_id: str, placement_id: str, gpus: Sequence[str]) -> Placement | None:
        """Record the GPUs a workload's current placement holds now; None (nothing changed) when that
        placement is not its current one."""
        row = await self._conn.fetchrow(MOVE_PLACEMENT, workload_id, placement_id, list(gpus))
        return None if row is None else _placement(row)

    async def end(self, *, workload_id: str, placement_id: str) -> None:
        """Forget a placement that ended, unless the workload already has a newer one."""
        await self._conn.execute(DELETE_PLACEMENT, workload_id, placement_id)

    async def on_gpu(self, gpu: str) -> list[Placement]:
        """Workloads holding a GPU."""
        return [_placement(r) for r in await self._conn.fetch(SELECT_PLACEMENTS_ON_GPU, gpu)]

    async def on_node(self, node: str) -> list[Placement]:
        """Workloads placed on a node."""
        return [_placement(r) for r in await self._conn.fetch(SELECT_PLACEMENTS_ON_NODE, node)]

    async def of(self, workload_ids: Sequence[str]) -> dict[str, Placement]:
        """Current placements of the given workloads, by workload id."""
        rows = await self._conn.fetch(SELECT_PLACEMENTS, list(workload_ids))
        return {r["workload_id"]: _placement(r) for r in rows}

    async def set_health(self, *, gpu: str, node: str, health: str) -> None:
        """Record a GPU's health as inventory reported it."""
        await self._conn.execute(UPSERT_HEALTH, gpu, node, health)

    async def health_of(self, gpus: Sequence[str]) -> dict[str, str]:
        """Health of the given GPUs as inventory last reported it (GPUs never reported are left out)."""
        rows = await self._conn.fetch(SELECT_HEALTH, list(gpus))
        return {r["gpu_uuid"]: r["health"] for r in rows}

    async def out_of_service_on_node(self, node: str) -> list[str]:
        """GPUs of a node that inventory reports draining or failed."""
        return [r["gpu_uuid"] for r in await self._conn.fetch(SELECT_OUT_OF_SERVICE_ON_NODE, node)]
