"""Telemetry's rollups table: closed windows of every GPU. Never commits (the unit of work does)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg

from services.telemetry.domain.rollup import GpuWindow

__all__ = ["RollupStore"]

UPSERT_ROLLUPS = """
INSERT INTO rollups (gpu_uuid, window_start, window_s, node, model, samples, workload_id, tenant_id, stats)
SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::real[], $4::text[], $5::text[], $6::int[],
                     $7::text[], $8::text[], $9::jsonb[])
ON CONFLICT (gpu_uuid, window_start) DO UPDATE SET
    samples = EXCLUDED.samples, stats = EXCLUDED.stats, workload_id = EXCLUDED.workload_id,
    tenant_id = EXCLUDED.tenant_id, window_s = EXCLUDED.window_s
"""
HISTORY = """
SELECT window_start, window_s, node, model, samples, workload_id, tenant_id, stats
FROM rollups
WHERE gpu_uuid = $1 AND window_start >= $2 AND window_start < $3 AND ($4::text IS NULL OR tenant_id = $4)
ORDER BY window_start
LIMIT $5
"""


class RollupStore:
    """Rollup SQL on one connection (inside a unit of work, or the pool for reads)."""

    def __init__(self, conn: asyncpg.Connection[Any] | asyncpg.Pool[Any]) -> None:
        self._conn = conn

    async def upsert_rollups(self, windows: Sequence[GpuWindow]) -> None:
        """Write closed windows; writing the same window again overwrites it (replays are harmless)."""
        await self._conn.execute(
            UPSERT_ROLLUPS,
            [w.gpu for w in windows],
            [w.window_start for w in windows],
            [w.window_s for w in windows],
            [w.node for w in windows],
            [w.model for w in windows],
            [w.samples for w in windows],
            [w.workload_id for w in windows],
            [w.tenant_id for w in windows],
            [json.dumps(w.stats) for w in windows],
        )

    async def history(
        self, *, gpu_uuid: str, start: datetime, end: datetime, tenant: str | None, limit: int
    ) -> list[dict[str, Any]]:
        """Rollups of one GPU in [start, end), only the tenant's windows when a tenant asks."""
        rows = await self._conn.fetch(HISTORY, gpu_uuid, start, end, tenant, limit)
        return [{**dict(r), "stats": json.loads(r["stats"])} for r in rows]
