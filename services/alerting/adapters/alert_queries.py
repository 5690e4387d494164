"""Read-side queries of the API: active alerts and alert history."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg
from pydantic import BaseModel

__all__ = ["AlertOut", "active_alerts", "alert_history"]

ACTIVE = (
    "SELECT * FROM alerts WHERE ends_at IS NULL AND ($1::text IS NULL OR tenant = $1) "
    "ORDER BY starts_at DESC LIMIT $2"
)
HISTORY = (
    "SELECT * FROM alerts WHERE ($1::text IS NULL OR tenant = $1) "
    "AND ($2::text IS NULL OR fingerprint = $2) AND ($3::text IS NULL OR rule = $3) "
    "ORDER BY starts_at DESC, id DESC LIMIT $4"
)


class AlertOut(BaseModel):
    """A firing alert, or a past one in the history."""

    fingerprint: str
    rule: str
    status: str
    severity: str
    tenant: str | None
    labels: dict[str, str]
    annotations: dict[str, str]
    value: float | None
    starts_at: datetime
    ends_at: datetime | None


def _out(row: Any) -> AlertOut:
    fields = {k: row[k] for k in AlertOut.model_fields if k != "status"}
    return AlertOut(**fields, status="firing" if row["ends_at"] is None else "resolved")


async def active_alerts(conn: asyncpg.Connection[Any], *, tenant: str | None, limit: int) -> list[AlertOut]:
    """Alerts firing now."""
    return [_out(r) for r in await conn.fetch(ACTIVE, tenant, limit)]


async def alert_history(
    conn: asyncpg.Connection[Any],
    *,
    tenant: str | None,
    fingerprint: str | None,
    rule: str | None,
    limit: int,
) -> list[AlertOut]:
    """Firing and resolved alerts, newest first."""
    return [_out(r) for r in await conn.fetch(HISTORY, tenant, fingerprint, rule, limit)]
