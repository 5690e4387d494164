"""Evaluation state in Postgres: series/node/event rows, groups, alert history, queued signals."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

from services.alerting.domain.absence import NodeState
from services.alerting.domain.alert_lifecycle import Transition, TransitionKind, pending_writes
from services.alerting.domain.engine import Changes, EventAlert
from services.alerting.domain.grouping import AlertGroup, Notification
from services.alerting.domain.series_evaluation import SeriesState
from services.alerting.domain.signals import Signal

__all__ = ["Restored", "StateStore"]

LOAD_STATE = "SELECT key, kind, state FROM series_state"
UPSERT_STATE = (
    "INSERT INTO series_state (key, kind, state) VALUES ($1, $2, $3) "
    "ON CONFLICT (key) DO UPDATE SET state = EXCLUDED.state, updated_at = now()"
)
DELETE_STATE = "DELETE FROM series_state WHERE key = $1 AND kind = $2"
LOAD_GROUPS = "SELECT key, state FROM alert_groups"
UPSERT_GROUP = (
    "INSERT INTO alert_groups (key, state) VALUES ($1, $2) "
    "ON CONFLICT (key) DO UPDATE SET state = EXCLUDED.state, updated_at = now()"
)
DELETE_GROUP = "DELETE FROM alert_groups WHERE key = $1"
OPEN_ALERT = (
    "INSERT INTO alerts (fingerprint, rule, tenant, severity, labels, annotations, value, starts_at) "
    "VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (fingerprint) WHERE ends_at IS NULL DO NOTHING"
)
CLOSE_ALERT = "UPDATE alerts SET ends_at = $2 WHERE fingerprint = $1 AND ends_at IS NULL"
UPSERT_PENDING = (
    "INSERT INTO pending_alerts (fingerprint, rule, tenant, severity, labels, annotations, value, active_at, "
    "fires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (fingerprint) DO UPDATE SET "
    "rule = EXCLUDED.rule, tenant = EXCLUDED.tenant, severity = EXCLUDED.severity, labels = EXCLUDED.labels, "
    "annotations = EXCLUDED.annotations, value = EXCLUDED.value, active_at = EXCLUDED.active_at, "
    "fires_at = EXCLUDED.fires_at"
)
DELETE_PENDING = "DELETE FROM pending_alerts WHERE fingerprint = ANY($1::text[])"
CLEAR_PENDING = "DELETE FROM pending_alerts"
INSERT_NOTIFICATION = (
    "INSERT INTO notifications (id, receiver, group_key, payload, created_at, next_attempt_at) "
    "VALUES ($1, $2, $3, $4, $5, now()) ON CONFLICT (id) DO NOTHING RETURNING id"
)
LINK_ALERT = (
    "INSERT INTO notification_alerts (notification_id, fingerprint, tenant) VALUES ($1, $2, $3) "
    "ON CONFLICT DO NOTHING"
)
INSERT_SIGNAL = "INSERT INTO signals (payload) VALUES ($1)"
TAKE_SIGNALS = "SELECT id, payload FROM signals ORDER BY id LIMIT $1"
DELETE_SIGNALS = "DELETE FROM signals WHERE id = ANY($1::bigint[])"


@dataclass(frozen=True, slots=True)
class Restored:
    """What the evaluator loads at start."""

    series: dict[str, SeriesState]
    nodes: dict[str, NodeState]
    events: dict[str, EventAlert]
    groups: dict[str, AlertGroup]


class StateStore:
    """SQL for evaluation state on one connection; never commits."""

    def __init__(self, conn: asyncpg.Connection[Any]) -> None:
        self._conn = conn

    async def load(self) -> Restored:
        """Every persisted series, node, event alert and group."""
        rows = await self._conn.fetch(LOAD_STATE)
        series = {r["key"]: SeriesState.model_validate(r["state"]) for r in rows if r["kind"] == "series"}
        nodes = {r["key"]: NodeState.model_validate(r["state"]) for r in rows if r["kind"] == "node"}
        events = {r["key"]: EventAlert.model_validate(r["state"]) for r in rows if r["kind"] == "event"}
        groups = {
            r["key"]: AlertGroup.model_validate(r["state"]) for r in await self._conn.fetch(LOAD_GROUPS)
        }
        return Restored(series=series, nodes=nodes, events=events, groups=groups)

    async def save(self, changes: Changes) -> list[str]:
        """Write the changes; returns the ids of notifications that are new (not replays)."""
        for kind, rows in (("series", changes.series), ("node", changes.nodes), ("event", changes.events)):
            await self._save_rows(kind, rows)
        for key, group in changes.groups.items():
            if group is None:
                await self._conn.execute(DELETE_GROUP, key)
            else:
                await self._conn.execute(UPSERT_GROUP, key, group.model_dump(mode="json"))
        for change in changes.transitions:
            await self._record_alert(change)
        await self.record_pending(changes.transitions)
        return [n.id for n in changes.notifications if await self._add_notification(n)]

    async def _save_rows(self, kind: str, rows: Mapping[str, Any]) -> None:
        upserts = [(k, kind, v.model_dump(mode="json")) for k, v in rows.items() if v is not None]
        deletes = [(k, kind) for k, v in rows.items() if v is None]
        if upserts:
            await self._conn.executemany(UPSERT_STATE, upserts)
        if deletes:
            await self._conn.executemany(DELETE_STATE, deletes)

    async def _record_alert(self, change: Transition) -> None:
        alert = change.alert
        if change.kind is TransitionKind.FIRING:
            await self._conn.execute(
                OPEN_ALERT,
                alert.fingerprint,
                change.rule,
                alert.labels.get("tenant"),
                alert.labels.get("severity", "warning"),
                alert.labels,
                alert.annotations,
                alert.value,
                alert.starts_at,
            )
        elif change.kind is TransitionKind.RESOLVED:
            await self._conn.execute(CLOSE_ALERT, alert.fingerprint, change.at)

    async def record_pending(self, transitions: Sequence[Transition]) -> None:
        """List the alerts that went pending, forget those that fired or ended: one statement each way,
        and none for no transitions (a steady stream writes nothing)."""
        writes, forgets = pending_writes(transitions)
        if writes:
            await self._conn.executemany(UPSERT_PENDING, [_pending_row(c) for c in writes])
        if forgets:
            await self._conn.execute(DELETE_PENDING, forgets)

    async def replace_pending(self, pending: Sequence[Transition]) -> None:
        """Exactly these pending alerts (an evaluator taking over: the rest it cannot vouch for)."""
        await self._conn.execute(CLEAR_PENDING)
        await self.record_pending(pending)

    async def _add_notification(self, notification: Notification) -> bool:
        new = await self._conn.fetchval(
            INSERT_NOTIFICATION,
            notification.id,
            notification.receiver,
            notification.group_key,
            notification.model_dump(mode="json"),
            notification.created_at,
        )
        if new is None:
            return False  # same id already written: a replay must not page twice
        links = [(notification.id, a.fingerprint, a.labels.get("tenant")) for a in notification.alerts]
        await self._conn.executemany(LINK_ALERT, links)
        return True

    async def queue_signal(self, signal: Signal) -> None:
        """Queue a signal for the evaluator (from a consumer handler, in its inbox transaction)."""
        await self._conn.execute(INSERT_SIGNAL, signal.model_dump(mode="json"))

    async def take_signals(self, *, limit: int = 500) -> list[tuple[int, Signal]]:
        """The oldest queued signals; delete them with `done_signals` in the same transaction."""
        rows = await self._conn.fetch(TAKE_SIGNALS, limit)
        return [(r["id"], Signal.model_validate(r["payload"])) for r in rows]

    async def done_signals(self, ids: list[int]) -> None:
        """Forget applied signals."""
        if ids:
            await self._conn.execute(DELETE_SIGNALS, ids)


def _pending_row(change: Transition) -> tuple[Any, ...]:
    alert = change.alert
    fires_at = change.fires_at or alert.starts_at
    labels = alert.labels
    tenant, severity = labels.get("tenant"), labels.get("severity", "warning")
    return (
        alert.fingerprint,
        change.rule,
        tenant,
        severity,
        labels,
        alert.annotations,
        alert.value,
        alert.starts_at,
        fires_at,
    )
