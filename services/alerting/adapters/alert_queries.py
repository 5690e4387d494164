"""Read-side queries of the API: firing and pending alerts, and alert history."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

import asyncpg
from pydantic import BaseModel, Field

__all__ = ["AlertOut", "active_alerts", "alert_history", "pending_alerts"]

ACTIVE = (
    "SELECT * FROM alerts WHERE ends_at IS NULL AND ($1::text IS NULL OR tenant = $1) "
    "ORDER BY starts_at DESC LIMIT $2"
)
PENDING = (
    "SELECT * FROM pending_alerts WHERE ($1::text IS NULL OR tenant = $1) "
    "ORDER BY active_at DESC, fingerprint LIMIT $2"
)
HISTORY = (
    "SELECT * FROM alerts WHERE ($1::text IS NULL OR tenant = $1) "
    "AND ($2::text IS NULL OR fingerprint = $2) AND ($3::text IS NULL OR rule = $3) "
    "ORDER BY starts_at DESC, id DESC LIMIT $4"
)


class AlertOut(BaseModel):
    """A firing or pending alert, or a past one in the history."""

    fingerprint: str
    rule: str
    status: Literal["firing", "pending", "resolved"] = Field(
        description="firing, pending (its condition holds, its `for` not yet) or resolved."
    )
    severity: str
    tenant: str | None
    labels: dict[str, str]
    annotations: dict[str, str]
    value: float | None
    starts_at: datetime = Field(
        description="When it fired; for a pending alert, when its condition began to hold."
    )
    ends_at: datetime | None
    active_at: datetime | None = Field(
        default=None, description="A pending alert's start of its `for` countdown; null otherwise."
    )
    fires_at: datetime | None = Field(
        default=None,
        description="When a pending alert's `for` elapses, if its condition still holds; null otherwise.",
    )


_DERIVED = ("status", "active_at", "fires_at")  # not columns of the alerts table


def _out(row: Any) -> AlertOut:
    fields = {k: row[k] for k in AlertOut.model_fields if k not in _DERIVED}
    return AlertOut(**fields, status="firing" if row["ends_at"] is None else "resolved")


def _pending_out(row: Any) -> AlertOut:
    fields = {k: row[k] for k in AlertOut.model_fields if k not in (*_DERIVED, "starts_at", "ends_at")}
    at = row["active_at"]
    return AlertOut(
        **fields, status="pending", starts_at=at, ends_at=None, active_at=at, fires_at=row["fires_at"]
    )


async def active_alerts(conn: asyncpg.Connection[Any], *, tenant: str | None, limit: int) -> list[AlertOut]:
    """Alerts firing now."""
    return [_out(r) for r in await conn.fetch(ACTIVE, tenant, limit)]


async def pending_alerts(conn: asyncpg.Connection[Any], *, tenant: str | None, limit: int) -> list[AlertOut]:
    """Alerts whose condition holds and whose `for` has not elapsed, newest first."""
    return [_pending_out(r) for r in await conn.fetch(PENDING, tenant, limit)]


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
