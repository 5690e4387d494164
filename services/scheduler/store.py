"""asyncpg SQL for workloads, placements and drafts; takes a connection and never commits."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any, TypeAlias

import asyncpg

from libs.common.db.uow import OutboxRow, outbox_columns
from services.scheduler.store_fleet import FAIR_SHARE_COLUMNS, FAIR_SHARE_SOURCES

__all__ = ["WAKE_CHANNEL", "Store"]

Conn: TypeAlias = "asyncpg.Connection[Any] | asyncpg.Pool[Any]"
#: NOTIFY channel that wakes the active placer (payload: the schema, so test schemas never cross).
WAKE_CHANNEL = "gpucloud_scheduler_wake"

GET_WORKLOAD = "SELECT * FROM workloads WHERE workload_id = $1 AND ($2::text IS NULL OR tenant_id = $2)"
LOCK_WORKLOAD = "SELECT * FROM workloads WHERE workload_id = $1 FOR UPDATE"
LIST_WORKLOADS = """
SELECT * FROM workloads WHERE ($1::text IS NULL OR tenant_id = $1) AND ($2::text IS NULL OR state = $2)
ORDER BY submitted_at DESC, workload_id LIMIT $3
"""
WAITING = "SELECT * FROM workloads WHERE state IN ('queued', 'migrating') ORDER BY submitted_at, workload_id"
QUEUE_VIEW = """
SELECT * FROM workloads WHERE state IN ('queued', 'migrating') AND ($1::text IS NULL OR tenant_id = $1)
ORDER BY position NULLS LAST, submitted_at, workload_id
"""
COUNT_WAITING = "SELECT count(*) FROM workloads WHERE state IN ('queued', 'migrating')"
SET_STATE = """
UPDATE workloads SET state = $2, placement_id = $3, wait_reason = NULL, position = NULL,
    estimated_start = NULL, priority = coalesce($4, priority)
WHERE workload_id = $1
"""
END_WORKLOAD = """
UPDATE workloads SET state = $2, outcome = $3, reason = $4, ended_at = $5, position = NULL,
    wait_reason = NULL, estimated_start = NULL
WHERE workload_id = $1
"""
START_MIGRATION = """
UPDATE workloads SET state = 'migrating', pinned_priority = $2,
    avoid_gpus = (SELECT jsonb_agg(DISTINCT g) FROM jsonb_array_elements(avoid_gpus || $3::jsonb) g)
WHERE workload_id = $1
"""
RECORD_WAITING = """
UPDATE workloads w SET position = v.position, priority = v.priority, wait_reason = v.reason,
    estimated_start = v.estimated_start
FROM unnest($1::text[], $2::int[], $3::float8[], $4::text[], $5::timestamptz[])
    AS v(workload_id, position, priority, reason, estimated_start)
WHERE w.workload_id = v.workload_id AND w.state IN ('queued', 'migrating')
"""
INSERT_PLACEMENT = """
INSERT INTO placements (placement_id, workload_id, tenant_id, node, grants, gpus, units_milli, models,
    priority, preemptible, ends_at, placed_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
"""
INSERT_SLOTS = """
INSERT INTO held_slots (gpu_uuid, slot, placement_id)
SELECT g, s, $3 FROM unnest($1::text[], $2::text[]) AS v(g, s)
"""
GET_PLACEMENT = "SELECT * FROM placements WHERE placement_id = $1 FOR UPDATE"
LIVE_PLACEMENTS = "SELECT * FROM placements WHERE ended_at IS NULL"
END_PLACEMENT = """
UPDATE placements SET ended_at = $2, outcome = $3, quota_released = $4 WHERE placement_id = $1
  AND ended_at IS NULL RETURNING *
"""
FREE_SLOTS = "DELETE FROM held_slots WHERE placement_id = $1"
MARK_MIGRATING = "UPDATE placements SET migrating = true WHERE placement_id = $1"
SCHEDULE_PREEMPTION = """
UPDATE placements SET preempt_deadline = $2, preempted_for = $3
WHERE placement_id = $1 AND ended_at IS NULL AND preempt_deadline IS NULL RETURNING *
"""
EXPIRED_PREEMPTIONS = """
SELECT placement_id FROM placements WHERE ended_at IS NULL AND preempt_deadline <= $1
"""
#: In the partial index's order and a batch at a time, so the read walks that index (see QUEUE_READS).
UNRELEASED = """
SELECT placement_id, tenant_id FROM placements WHERE ended_at IS NOT NULL AND NOT quota_released
ORDER BY placement_id LIMIT $1
"""
MARK_RELEASED = "UPDATE placements SET quota_released = true WHERE placement_id = ANY($1::text[])"
HISTORY = """
SELECT p.*, w.spec FROM placements p JOIN workloads w USING (workload_id)
WHERE p.tenant_id = $1 AND p.outcome = 'completed' AND p.started_at IS NOT NULL
ORDER BY p.ended_at DESC LIMIT 500
"""
INSERT_DRAFT = "INSERT INTO drafts (draft_id, tenant_id, body) VALUES ($1, $2, $3)"
GET_DRAFT = "SELECT * FROM drafts WHERE draft_id = $1 AND ($2::text IS NULL OR tenant_id = $2) FOR UPDATE"
UPDATE_DRAFT = "UPDATE drafts SET body = $2, workload_id = $3, updated_at = now() WHERE draft_id = $1"
NOTIFY_WAKE = "SELECT pg_notify($1, current_schema())"
#: The agent's start, as one statement: only for the workload's current placement while it is placed
#: (the row locked, so a concurrent exit waits); answers the workload's tenant and trace, or nothing.
START_WORKLOAD = """
WITH w AS (
    SELECT workload_id, tenant_id, traceparent FROM workloads
    WHERE workload_id = $1 AND placement_id = $2 AND state = 'placed'
    FOR UPDATE
), p AS (
    UPDATE placements SET started_at = $3
    WHERE placement_id = $2 AND started_at IS NULL AND EXISTS (SELECT 1 FROM w)
), s AS (
    UPDATE workloads x SET state = 'running', wait_reason = NULL, position = NULL, estimated_start = NULL
    FROM w WHERE x.workload_id = w.workload_id
)
SELECT tenant_id, traceparent FROM w
"""
#: The agent's exit, as one statement: the workload (its current placement, placed or running) locked,
#: the placement ended and its slots freed, the workload ended, and the tenant's usage row locked for
#: the accrual that follows, and the placer woken (at commit) for the freed GPUs. No row (and no wake-up)
#: when the report is stale or the placement had already ended.
END_WORKLOAD_RUN = """
WITH w AS (
    SELECT workload_id, tenant_id, traceparent FROM workloads
    WHERE workload_id = $1 AND placement_id = $2 AND state IN ('placed', 'running')
    FOR UPDATE
), p AS (
    UPDATE placements SET ended_at = $3, outcome = $4, quota_released = false
    WHERE placement_id = $2 AND ended_at IS NULL AND EXISTS (SELECT 1 FROM w)
    RETURNING started_at, placed_at, units_milli
), h AS (
    DELETE FROM held_slots WHERE placement_id = $2 AND EXISTS (SELECT 1 FROM w)
), e AS (
    UPDATE workloads x SET state = $4, outcome = $4, reason = $5, ended_at = $3, position = NULL,
        wait_reason = NULL, estimated_start = NULL
    FROM w WHERE x.workload_id = w.workload_id AND EXISTS (SELECT 1 FROM p)
), u AS (
    SELECT decayed_unit_hours, as_of FROM tenant_usage
    WHERE tenant_id = (SELECT tenant_id FROM w) AND EXISTS (SELECT 1 FROM p)
    FOR UPDATE
)
SELECT w.tenant_id, w.traceparent, p.started_at, p.placed_at, p.units_milli, u.decayed_unit_hours, u.as_of,
    pg_notify($6, current_schema()) AS woke_placer
FROM w CROSS JOIN p LEFT JOIN u ON true
"""
#: Several placements as one statement, so one implicit transaction: the workloads still queued are locked
#: (in id order, so two lockers never deadlock), and for those only the placement rows, held slots (the
#: primary key refuses a slot held twice, the partial unique index a second live placement), workload
#: states and outbox rows ($21: each outbox row's workload) are written; the relay's NOTIFY is delivered
#: at commit. Any violation fails the whole statement. Answers the workloads placed.
PLACE_MANY = """
WITH q AS (
    SELECT workload_id FROM workloads WHERE workload_id = ANY($2::text[]) AND state = 'queued'
    ORDER BY workload_id FOR UPDATE
), p AS (
    INSERT INTO placements (placement_id, workload_id, tenant_id, node, grants, gpus, units_milli, models,
        priority, preemptible, ends_at, placed_at)
    SELECT pid, wid, tid, node, grants::jsonb, gpus, units, models::jsonb, prio, pre, ends, placed
    FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int[], $7::bigint[],
        $8::text[], $9::float8[], $10::bool[], $11::timestamptz[], $12::timestamptz[])
        AS v(pid, wid, tid, node, grants, gpus, units, models, prio, pre, ends, placed)
    WHERE v.wid IN (SELECT workload_id FROM q)
    RETURNING placement_id, workload_id
), s AS (
    INSERT INTO held_slots (gpu_uuid, slot, placement_id)
    SELECT g, sl, pid FROM unnest($13::text[], $14::text[], $15::text[]) AS v(g, sl, pid)
    WHERE v.pid IN (SELECT placement_id FROM p)
), w AS (
    UPDATE workloads w SET state = 'placed', placement_id = v.pid, wait_reason = NULL, position = NULL,
        estimated_start = NULL, priority = v.prio
    FROM unnest($2::text[], $1::text[], $9::float8[]) AS v(wid, pid, prio)
    WHERE w.workload_id = v.wid AND v.pid IN (SELECT placement_id FROM p)
), o AS (
    INSERT INTO outbox (event_id, topic, key, payload, traceparent)
    SELECT event_id, topic, key, payload, traceparent
    FROM unnest($16::uuid[], $17::text[], $18::text[], $19::bytea[], $20::text[], $21::text[])
        WITH ORDINALITY AS v(event_id, topic, key, payload, traceparent, wid, n)
    WHERE v.wid IN (SELECT workload_id FROM p)
    ORDER BY n
)
SELECT coalesce(array_agg(workload_id), '{}') AS placed, pg_notify('gpucloud_outbox', current_schema())
FROM p
"""
#: Everything a submission decides on, in one round trip and one snapshot: fair-share inputs, the
#: tenant's quota row (if any), the project's budget stop (if any) and how many workloads wait.
SUBMIT_CONTEXT = f"""
SELECT {FAIR_SHARE_COLUMNS},
    q.tenant_id IS NOT NULL AS has_quota, q.gpus, q.units_milli, q.workloads, b.reason AS stop, c.waiting
FROM {FAIR_SHARE_SOURCES},
    (SELECT count(*) AS waiting FROM workloads WHERE state IN ('queued', 'migrating')) c
    LEFT JOIN LATERAL (SELECT * FROM tenant_quotas WHERE tenant_id = $1) q ON true
    LEFT JOIN LATERAL (
        SELECT reason FROM budget_stops WHERE tenant_id = $1 AND project = $2 AND month = $3
    ) b ON true
"""
#: A submission as one statement (so one implicit transaction): the workload row, its outbox rows and
#: both wake-ups (the placer's and the relay's, delivered at commit); returns the new row.
SUBMIT = """
WITH w AS (
    INSERT INTO workloads (workload_id, tenant_id, kind, state, spec, urgency, preemptible, tags,
        submitted_at, priority, traceparent)
    VALUES ($1, $2, $3, 'queued', $4, $5, $6, $7, $8, $9, $10)
    RETURNING *
), o AS (
    INSERT INTO outbox (event_id, topic, key, payload, traceparent)
    SELECT event_id, topic, key, payload, traceparent
    FROM unnest($11::uuid[], $12::text[], $13::text[], $14::bytea[], $15::text[]) WITH ORDINALITY
        AS v(event_id, topic, key, payload, traceparent, n)
    ORDER BY n
)
SELECT w.*, pg_notify($16, current_schema()) AS woke_placer,
    pg_notify('gpucloud_outbox', current_schema()) AS woke_relay
FROM w
"""


def _json(value: Any) -> str:
    return json.dumps(value, default=str)


class Store:
    """Workload, placement and draft rows on one connection (or the pool, for reads)."""

    def __init__(self, conn: Conn) -> None:
        self.conn = conn

    async def submit_context(self, *, tenant: str, project: str | None, month: str) -> asyncpg.Record:
        """Fair-share inputs, the tenant's quota, the project's budget stop and the queue length."""
        row = await self.conn.fetchrow(SUBMIT_CONTEXT, tenant, project, month)
        assert row is not None  # aggregates without GROUP BY always answer one row
        return row

    async def submit(self, *, row: dict[str, Any], outbox: Sequence[OutboxRow]) -> asyncpg.Record:
        """Insert a queued workload with its outbox rows and wake placer and relay, as one statement."""
        found = await self.conn.fetchrow(
            SUBMIT,
            row["workload_id"],
            row["tenant_id"],
            row["kind"],
            row["spec"],
            row["urgency"],
            row["preemptible"],
            row["tags"],
            row["submitted_at"],
            row["priority"],
            row.get("traceparent"),
            *outbox_columns(outbox),
            WAKE_CHANNEL,
        )
        assert found is not None
        return found

    async def start_run(self, workload_id: str, *, placement_id: str, at: datetime) -> asyncpg.Record | None:
        """Mark the current placement started and the workload running; None when the report is stale."""
        return await self.conn.fetchrow(START_WORKLOAD, workload_id, placement_id, at)

    async def end_run(
        self, workload_id: str, *, placement_id: str, outcome: str, reason: str, at: datetime
    ) -> asyncpg.Record | None:
        """End the current placement and the workload, free its slots, lock the tenant's usage row and
        wake the placer; None when the report is stale or the placement had already ended."""
        return await self.conn.fetchrow(
            END_WORKLOAD_RUN, workload_id, placement_id, at, outcome, reason, WAKE_CHANNEL
        )

    async def place_many(
        self,
        *,
        rows: Sequence[dict[str, Any]],
        slots: Sequence[tuple[str, str, str]],
        outbox: Sequence[tuple[str, OutboxRow]],
    ) -> set[str]:
        """Record the placements (rows as ``insert_placement`` takes) of the workloads still queued, their
        slots (gpu, slot, placement id), the workloads' new state and their outbox rows (workload id, row),
        in one statement; returns the workloads placed."""
        cols = ("placement_id", "workload_id", "tenant_id", "node")
        args: list[list[Any]] = [[r[c] for r in rows] for c in cols]
        args.append([_json(r["grants"]) for r in rows])
        args += [[r[c] for r in rows] for c in ("gpus", "units_milli")]
        args.append([_json(r["models"]) for r in rows])
        args += [[r[c] for r in rows] for c in ("priority", "preemptible", "ends_at", "placed_at")]
        args += [[s[i] for s in slots] for i in range(3)]
        args += outbox_columns([o for _w, o in outbox])
        args.append([w for w, _o in outbox])
        return set(await self.conn.fetchval(PLACE_MANY, *args))

    async def workload(self, workload_id: str, *, tenant: str | None = None) -> asyncpg.Record | None:
        """A workload, visible to ``tenant`` (None = any)."""
        return await self.conn.fetchrow(GET_WORKLOAD, workload_id, tenant)

    async def lock_workload(self, workload_id: str) -> asyncpg.Record | None:
        """A workload row locked for this transaction."""
        return await self.conn.fetchrow(LOCK_WORKLOAD, workload_id)

    async def workloads(self, *, tenant: str | None, state: str | None, limit: int) -> list[asyncpg.Record]:
        """Newest first."""
        return list(await self.conn.fetch(LIST_WORKLOADS, tenant, state, limit))

    async def waiting(self) -> list[asyncpg.Record]:
        """Every queued or migrating workload, oldest first."""
        return list(await self.conn.fetch(WAITING))

    async def queue(self, *, tenant: str | None) -> list[asyncpg.Record]:
        """Waiting workloads in queue order."""
        return list(await self.conn.fetch(QUEUE_VIEW, tenant))

    async def count_waiting(self) -> int:
        """How many workloads wait."""
        return int(await self.conn.fetchval(COUNT_WAITING))

    async def set_state(
        self, workload_id: str, *, state: str, placement_id: str | None, priority: float | None = None
    ) -> None:
        """Move a workload to a non-terminal state."""
        await self.conn.execute(SET_STATE, workload_id, state, placement_id, priority)

    async def end_workload(
        self, workload_id: str, *, state: str, outcome: str, reason: str, at: datetime
    ) -> None:
        """Move a workload to a terminal state."""
        await self.conn.execute(END_WORKLOAD, workload_id, state, outcome, reason, at)

    async def start_migration(self, workload_id: str, *, priority: float, avoid_gpu: str) -> None:
        """Mark a workload migrating, its priority pinned and a GPU to avoid."""
        await self.conn.execute(START_MIGRATION, workload_id, priority, _json([avoid_gpu]))

    async def record_waiting(self, rows: Sequence[tuple[str, int, float, str, datetime | None]]) -> None:
        """Store each waiting workload's position, priority, reason and estimated start."""
        if rows:
            await self.conn.execute(RECORD_WAITING, *(list(col) for col in zip(*rows, strict=True)))

    async def insert_placement(self, *, row: dict[str, Any], slots: Sequence[tuple[str, str]]) -> None:
        """Record a placement and the slots it holds (a held slot raises UniqueViolationError)."""
        await self.conn.execute(
            INSERT_PLACEMENT,
            row["placement_id"],
            row["workload_id"],
            row["tenant_id"],
            row["node"],
            row["grants"],
            row["gpus"],
            row["units_milli"],
            row["models"],
            row["priority"],
            row["preemptible"],
            row["ends_at"],
            row["placed_at"],
        )
        await self.conn.execute(
            INSERT_SLOTS, [g for g, _ in slots], [s for _, s in slots], row["placement_id"]
        )

    async def placement(self, placement_id: str) -> asyncpg.Record | None:
        """A placement row locked for this transaction."""
        return await self.conn.fetchrow(GET_PLACEMENT, placement_id)

    async def live_placements(self) -> list[asyncpg.Record]:
        """Every placement not ended."""
        return list(await self.conn.fetch(LIVE_PLACEMENTS))

    async def end_placement(
        self, placement_id: str, *, outcome: str, at: datetime, released: bool = False
    ) -> asyncpg.Record | None:
        """End a live placement and free its slots; None when it had already ended."""
        row = await self.conn.fetchrow(END_PLACEMENT, placement_id, at, outcome, released)
        await self.conn.execute(FREE_SLOTS, placement_id)
        return row

    async def mark_migrating(self, placement_id: str) -> None:
        """Free a migrating placement's slots: the workload is being re-placed."""
        await self.conn.execute(MARK_MIGRATING, placement_id)
        await self.conn.execute(FREE_SLOTS, placement_id)

    async def schedule_preemption(
        self, placement_id: str, *, deadline: datetime, preempted_for: str
    ) -> asyncpg.Record | None:
        """Set a victim's deadline once; None when already set or ended."""
        return await self.conn.fetchrow(SCHEDULE_PREEMPTION, placement_id, deadline, preempted_for)

    async def expired_preemptions(self, *, now: datetime) -> list[str]:
        """Live placements whose grace period is over."""
        return [r["placement_id"] for r in await self.conn.fetch(EXPIRED_PREEMPTIONS, now)]

    async def unreleased(self, *, limit: int) -> list[asyncpg.Record]:
        """Up to ``limit`` ended placements whose quota Redis still counts."""
        return list(await self.conn.fetch(UNRELEASED, limit))

    async def mark_released(self, placement_ids: Sequence[str]) -> None:
        """Record that Redis gave these placements' quota back."""
        await self.conn.execute(MARK_RELEASED, list(placement_ids))

    async def history(self, tenant: str) -> list[asyncpg.Record]:
        """The tenant's completed placements that ran, newest first."""
        return list(await self.conn.fetch(HISTORY, tenant))

    async def insert_draft(self, *, draft_id: str, tenant: str, body: dict[str, Any]) -> None:
        """Record an empty draft."""
        await self.conn.execute(INSERT_DRAFT, draft_id, tenant, body)

    async def draft(self, draft_id: str, *, tenant: str | None) -> asyncpg.Record | None:
        """A draft locked for this transaction."""
        return await self.conn.fetchrow(GET_DRAFT, draft_id, tenant)

    async def update_draft(self, draft_id: str, *, body: dict[str, Any], workload_id: str | None) -> None:
        """Replace a draft's body; a workload id marks it submitted."""
        await self.conn.execute(UPDATE_DRAFT, draft_id, body, workload_id)

    async def wake_placer(self) -> None:
        """Wake the active placer (delivered at commit, to whichever replica holds the lock)."""
        await self.conn.execute(NOTIFY_WAKE, WAKE_CHANNEL)
