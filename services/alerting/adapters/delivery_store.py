"""The notification outbox in Postgres: claiming due deliveries, the attempt log and dead letters."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from services.alerting.domain.grouping import Notification

__all__ = ["Claimed", "DeliveryStore"]

CLAIM_DUE = """
WITH c AS (
    UPDATE notifications n
       SET lease_until = now() + make_interval(secs => $2),
           first_attempt_at = COALESCE(n.first_attempt_at, now()),
           attempts = n.attempts + 1
     WHERE n.id IN (
           SELECT p.id FROM notifications p
            WHERE p.status = 'pending' AND p.next_attempt_at <= now()
              AND (p.lease_until IS NULL OR p.lease_until < now())
              -- one group's notifications go out in order: a resolve never overtakes its trigger
              AND NOT EXISTS (SELECT 1 FROM notifications o
                               WHERE o.group_key = p.group_key AND o.status = 'pending'
                                 AND (o.created_at, o.id) < (p.created_at, p.id))
            ORDER BY p.next_attempt_at
            LIMIT $1
              FOR UPDATE SKIP LOCKED)
    RETURNING n.id, n.receiver, n.payload, n.attempts, n.first_attempt_at
), logged AS (
    -- In the log before the request goes out, so an attempt whose outcome is never recorded still shows.
    INSERT INTO delivery_attempts (notification_id, receiver, attempt, outcome, duration_ms)
    SELECT id, receiver, attempts, 'sending', 0 FROM c
)
SELECT id, receiver, payload, attempts - 1 AS attempts, first_attempt_at FROM c
"""
#: The outcome of the attempt the claim logged as 'sending' (inserted when the claim predates that).
LOG_ATTEMPT = """
WITH u AS (
    UPDATE delivery_attempts SET status_code = $4, outcome = $5, error = $6, duration_ms = $7, at = now()
     WHERE notification_id = $1 AND attempt = $3 AND outcome = 'sending'
    RETURNING id
)
INSERT INTO delivery_attempts (notification_id, receiver, attempt, status_code, outcome, error, duration_ms)
SELECT $1, $2, $3, $4, $5, $6, $7 WHERE NOT EXISTS (SELECT 1 FROM u)
"""
MARK_DELIVERED = (
    "UPDATE notifications SET status = 'delivered', attempts = $2, delivered_at = now(), "
    "lease_until = NULL, last_error = NULL WHERE id = $1"
)
MARK_RETRY = (
    "UPDATE notifications SET attempts = $2, next_attempt_at = $3, lease_until = NULL, last_error = $4 "
    "WHERE id = $1"
)
MARK_DEAD = (
    "UPDATE notifications SET status = 'dead', attempts = $2, lease_until = NULL, last_error = $3 "
    "WHERE id = $1"
)
ADD_DEAD_LETTER = (
    "INSERT INTO delivery_dead_letters (notification_id, receiver, reason, attempts) VALUES ($1, $2, $3, $4) "
    "ON CONFLICT (notification_id) DO NOTHING"
)
ADD_TEST = (
    "INSERT INTO notifications (id, receiver, group_key, payload, created_at) VALUES ($1, $2, $3, $4, $5)"
)
_VISIBLE = (
    "($1::text IS NULL OR EXISTS (SELECT 1 FROM notification_alerts v "
    "WHERE v.notification_id = n.id AND v.tenant = $1))"
)
LIST_NOTIFICATIONS = f"""
SELECT n.id, n.receiver, n.status, n.attempts, n.created_at, n.delivered_at, n.last_error,
       n.next_attempt_at, ARRAY(SELECT fingerprint FROM notification_alerts a
                                 WHERE a.notification_id = n.id ORDER BY fingerprint) AS fingerprints
  FROM notifications n
 WHERE {_VISIBLE}
   AND ($2::text IS NULL OR EXISTS (SELECT 1 FROM notification_alerts f
                                     WHERE f.notification_id = n.id AND f.fingerprint = $2))
   AND ($3::text IS NULL OR n.id = $3)
 ORDER BY n.created_at DESC LIMIT $4
"""
LIST_ATTEMPTS = (
    "SELECT notification_id, attempt, at, status_code, outcome, error, duration_ms FROM delivery_attempts "
    "WHERE notification_id = ANY($1::text[]) ORDER BY id"
)
LIST_DEAD = f"""
SELECT d.id, d.notification_id, d.receiver, d.reason, d.attempts, d.created_at
  FROM delivery_dead_letters d JOIN notifications n ON n.id = d.notification_id
 WHERE {_VISIBLE}
 ORDER BY d.id DESC LIMIT $2
"""


@dataclass(frozen=True, slots=True)
class Claimed:
    """A notification leased to this worker for one attempt."""

    notification: Notification
    receiver: str
    attempts: int
    first_attempt_at: datetime


class DeliveryStore:
    """SQL for deliveries on one connection; never commits."""

    def __init__(self, conn: asyncpg.Connection[Any]) -> None:
        self._conn = conn

    async def claim_due(self, *, limit: int, lease_s: float) -> list[Claimed]:
        """Lease due notifications so no other worker sends them meanwhile."""
        rows = await self._conn.fetch(CLAIM_DUE, limit, lease_s)
        return [
            Claimed(
                notification=Notification.model_validate(r["payload"]),
                receiver=r["receiver"],
                attempts=r["attempts"],
                first_attempt_at=r["first_attempt_at"],
            )
            for r in rows
        ]

    async def log_attempt(
        self,
        claimed: Claimed,
        *,
        attempt: int,
        status: int | None,
        outcome: str,
        error: str | None,
        duration_ms: float,
    ) -> None:
        """Record the outcome of the attempt in the delivery log."""
        await self._conn.execute(
            LOG_ATTEMPT,
            claimed.notification.id,
            claimed.receiver,
            attempt,
            status,
            outcome,
            error,
            duration_ms,
        )

    async def delivered(self, notification_id: str, *, attempts: int) -> None:
        """Mark delivered (only after a 2xx)."""
        await self._conn.execute(MARK_DELIVERED, notification_id, attempts)

    async def retry(self, notification_id: str, *, attempts: int, at: datetime, error: str) -> None:
        """Schedule the next attempt."""
        await self._conn.execute(MARK_RETRY, notification_id, attempts, at, error)

    async def dead(self, claimed: Claimed, *, attempts: int, reason: str) -> None:
        """Give up and record a dead letter."""
        await self._conn.execute(MARK_DEAD, claimed.notification.id, attempts, reason)
        await self._conn.execute(ADD_DEAD_LETTER, claimed.notification.id, claimed.receiver, reason, attempts)

    async def add_test(self, notification: Notification) -> None:
        """Queue a test notification (not linked to any alert)."""
        await self._conn.execute(
            ADD_TEST,
            notification.id,
            notification.receiver,
            notification.group_key,
            notification.model_dump(mode="json"),
            notification.created_at,
        )

    async def notifications(
        self, *, tenant: str | None, fingerprint: str | None, notification_id: str | None, limit: int
    ) -> list[dict[str, Any]]:
        """Notifications with their attempts, newest first (a tenant sees those about its alerts)."""
        rows = await self._conn.fetch(LIST_NOTIFICATIONS, tenant, fingerprint, notification_id, limit)
        found = [dict(r) for r in rows]
        attempts = await self._conn.fetch(LIST_ATTEMPTS, [r["id"] for r in found])
        by_id: dict[str, list[dict[str, Any]]] = {}
        for a in attempts:
            by_id.setdefault(a["notification_id"], []).append(dict(a))
        for r in found:
            r["attempt_log"] = by_id.get(r["id"], [])
        return found

    async def dead_letters(self, *, tenant: str | None, limit: int) -> list[dict[str, Any]]:
        """Dead-lettered deliveries, newest first."""
        return [dict(r) for r in await self._conn.fetch(LIST_DEAD, tenant, limit)]
