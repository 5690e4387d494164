"""Postgres access for daily export schedules and the runs that wrote them (never commits)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any, TypeAlias

import asyncpg

from services.billing.adapters.export_queries import ExportFormat
from services.billing.domain.exports import ExportTotals

__all__ = ["DueExport", "ExportScheduleStore"]

Conn: TypeAlias = "asyncpg.Connection[Any] | asyncpg.Pool[Any]"

UPSERT_SCHEDULE = (
    "INSERT INTO export_schedules (tenant_id, project, format, first_day) VALUES ($1, $2, $3, $4) "
    "ON CONFLICT (tenant_id, project, format) DO UPDATE SET first_day = $4"
)
DUE_EXPORTS = """
SELECT s.tenant_id, s.project, s.format, d::date AS day
FROM export_schedules s, generate_series(s.first_day, $1::date, interval '1 day') AS d
WHERE NOT EXISTS (SELECT 1 FROM export_runs r WHERE r.tenant_id = s.tenant_id AND r.project = s.project
                  AND r.format = s.format AND r.day = d::date)
ORDER BY 4, 1, 2, 3 LIMIT 100
"""
RECORD_RUN = """
INSERT INTO export_runs (tenant_id, project, format, day, path, rows, debit_micro, credit_micro)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class DueExport:
    """One scheduled project's day not yet exported in one format."""

    tenant_id: str
    project: str
    format: ExportFormat
    day: date


class ExportScheduleStore:
    """Daily export schedules and the runs that wrote them."""

    def __init__(self, conn: Conn) -> None:
        self._conn = conn

    async def schedule(self, *, tenant_id: str, project: str, format: ExportFormat, first_day: date) -> None:
        """Export a project daily in one format from `first_day` on (replaces the first day)."""
        await self._conn.execute(UPSERT_SCHEDULE, tenant_id, project, format, first_day)

    async def due(self, *, last_day: date) -> list[DueExport]:
        """Scheduled days up to `last_day` not yet exported, oldest first (at most 100)."""
        return [
            DueExport(tenant_id=r["tenant_id"], project=r["project"], format=r["format"], day=r["day"])
            for r in await self._conn.fetch(DUE_EXPORTS, last_day)
        ]

    async def record_run(self, due: DueExport, *, path: str, totals: ExportTotals) -> None:
        """Keep a record of the file one due export was written to."""
        await self._conn.execute(
            RECORD_RUN,
            due.tenant_id,
            due.project,
            due.format,
            due.day,
            path,
            totals.rows,
            totals.debit_micro,
            totals.credit_micro,
        )
