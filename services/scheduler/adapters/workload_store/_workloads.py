"""Workload rows: submission, reads for the API and the pass, state changes and the queue's positions."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from libs.common.db.uow import OutboxRow, outbox_columns
from services.scheduler.adapters.fleet_store import (
    FAIR_SHARE_COLUMNS,
    FAIR_SHARE_SOURCES,
    fair_share_of,
    stored_quota,
)
from services.scheduler.adapters.workload_store._base import RUN_FACTS, WAKE_CHANNEL, Rows
from services.scheduler.domain.stored import StoredWorkload, SubmitContext, WaitingWorkload, columns_of

__all__ = ["WorkloadRows"]

#: A workload's columns in StoredWorkload's order.
WORKLOAD = columns_of(StoredWorkload)
_WORKLOAD_WIDTH = WORKLOAD.count(",") + 1

GET_WORKLOAD = f"""
SELECT {WORKLOAD} FROM workloads WHERE workload_id = $1 AND ($2::text IS NULL OR tenant_id = $2)
"""
LOCK_WORKLOAD = f"SELECT {WORKLOAD} FROM workloads WHERE workload_id = $1 FOR UPDATE"
LIST_WORKLOADS = f"""
SELECT {WORKLOAD} FROM workloads
WHERE ($1::text IS NULL OR tenant_id = $1) AND ($2::text IS NULL OR state = $2)
ORDER BY submitted_at DESC, workload_id LIMIT $3 OFFSET $4
"""
#: An array's workloads in item order ($1 the array; tenant, state, limit and offset as LIST_WORKLOADS).
LIST_ARRAY_WORKLOADS = f"""
SELECT {WORKLOAD} FROM workloads
WHERE array_id = $1 AND ($2::text IS NULL OR tenant_id = $2) AND ($3::text IS NULL OR state = $3)
ORDER BY array_index LIMIT $4 OFFSET $5
"""
WAITING = f"""
SELECT {columns_of(WaitingWorkload)} FROM workloads WHERE state IN ('queued', 'migrating')
ORDER BY submitted_at, workload_id
"""
WORKLOADS_BY_ID = f"SELECT {WORKLOAD} FROM workloads WHERE workload_id = ANY($1::text[])"
QUEUE_VIEW = f"""
SELECT {WORKLOAD} FROM workloads
WHERE state IN ('queued', 'migrating') AND ($1::text IS NULL OR tenant_id = $1)
ORDER BY position NULLS LAST, submitted_at, workload_id
"""
COUNT_WAITING = "SELECT count(*) FROM workloads WHERE state IN ('queued', 'migrating')"
#: The run's host facts are kept while the placement stays, forgotten when it changes. A migration's
#: pinned priority and avoided GPUs only choose its target: leaving the migration (placed there, or
#: requeued) forgets them, so a later preemption's requeue competes at its own priority, anywhere.
SET_STATE = f"""
UPDATE workloads SET state = $2, placement_id = $3, wait_reason = NULL, position = NULL,
    estimated_start = NULL, priority = coalesce($4, priority),
    pinned_priority = CASE WHEN $2 = 'migrating' THEN pinned_priority END,
    avoid_gpus = CASE WHEN $2 = 'migrating' THEN avoid_gpus ELSE '[]'::jsonb END,
    {", ".join(f"{c} = CASE WHEN placement_id IS NOT DISTINCT FROM $3 THEN {c} END" for c in RUN_FACTS)}
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
#: Everything a submission decides on, in one round trip and one snapshot: fair-share inputs, the
#: tenant's quota row (if any), the project's budget stop (if any) and how many workloads wait.
SUBMIT_CONTEXT = f"""
SELECT {FAIR_SHARE_COLUMNS},
    q.tenant_id, q.gpus, q.units_milli, q.workloads, b.reason AS stop, c.waiting
FROM {FAIR_SHARE_SOURCES},
    (SELECT count(*) AS waiting FROM workloads WHERE state IN ('queued', 'migrating')) c
    LEFT JOIN LATERAL (SELECT * FROM tenant_quotas WHERE tenant_id = $1) q ON true
    LEFT JOIN LATERAL (
        SELECT reason FROM budget_stops WHERE tenant_id = $1 AND project = $2 AND month = $3
    ) b ON true
"""
#: A submission as one statement (so one implicit transaction): the workload row (its run spec $17), its
#: outbox rows and both wake-ups (the placer's and the relay's, delivered at commit); returns the new row.
SUBMIT = f"""
WITH w AS (
    INSERT INTO workloads (workload_id, tenant_id, kind, state, spec, urgency, preemptible, tags,
        submitted_at, priority, traceparent, run_spec)
    VALUES ($1, $2, $3, 'queued', $4, $5, $6, $7, $8, $9, $10, $17)
    RETURNING {WORKLOAD}
), o AS (
    INSERT INTO outbox (event_id, topic, key, payload, traceparent)
    SELECT event_id, topic, key, payload, traceparent
    FROM unnest($11::uuid[], $12::text[], $13::text[], $14::bytea[], $15::text[]) WITH ORDINALITY
        AS v(event_id, topic, key, payload, traceparent, n)
    ORDER BY n
)
SELECT {columns_of(StoredWorkload, prefix="w.")}, pg_notify($16, current_schema()) AS woke_placer,
    pg_notify('gpucloud_outbox', current_schema()) AS woke_relay
FROM w
"""


class WorkloadRows(Rows):
    """The workloads table."""

    async def submit_context(self, *, tenant: str, project: str | None, month: str) -> SubmitContext:
        """Fair-share inputs, the tenant's quota, the project's budget stop and the queue length."""
        row = await self.conn.fetchrow(SUBMIT_CONTEXT, tenant, project, month)
        assert row is not None  # aggregates without GROUP BY always answer one row
        quota = stored_quota(row) if row["tenant_id"] is not None else None
        return SubmitContext(
            fair_share=fair_share_of(row), quota=quota, stop=row["stop"], waiting=int(row["waiting"])
        )

    async def submit(self, *, row: dict[str, Any], outbox: Sequence[OutboxRow]) -> StoredWorkload:
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
            row.get("run_spec"),
        )
        assert found is not None
        return StoredWorkload(*tuple(found)[:_WORKLOAD_WIDTH])

    async def workload(self, workload_id: str, *, tenant: str | None = None) -> StoredWorkload | None:
        """A workload, visible to ``tenant`` (None = any)."""
        found = await self.conn.fetchrow(GET_WORKLOAD, workload_id, tenant)
        return None if found is None else StoredWorkload(*found)

    async def lock_workload(self, workload_id: str) -> StoredWorkload | None:
        """A workload row locked for this transaction."""
        found = await self.conn.fetchrow(LOCK_WORKLOAD, workload_id)
        return None if found is None else StoredWorkload(*found)

    async def workloads(
        self,
        *,
        tenant: str | None,
        state: str | None,
        limit: int,
        offset: int = 0,
        array: str | None = None,
    ) -> list[StoredWorkload]:
        """Newest first; an array's in item order."""
        if array is not None:
            rows = await self.conn.fetch(LIST_ARRAY_WORKLOADS, array, tenant, state, limit, offset)
        else:
            rows = await self.conn.fetch(LIST_WORKLOADS, tenant, state, limit, offset)
        return [StoredWorkload(*r) for r in rows]

    async def waiting(self) -> list[WaitingWorkload]:
        """Every queued or migrating workload, oldest first, without its request."""
        return [WaitingWorkload(*r) for r in await self.conn.fetch(WAITING)]

    async def workloads_by_id(self, workload_ids: Sequence[str]) -> list[StoredWorkload]:
        """The workloads of these ids (in no particular order; an unknown id is left out)."""
        return [StoredWorkload(*r) for r in await self.conn.fetch(WORKLOADS_BY_ID, list(workload_ids))]

    async def queue(self, *, tenant: str | None) -> list[StoredWorkload]:
        """Waiting workloads in queue order."""
        return [StoredWorkload(*r) for r in await self.conn.fetch(QUEUE_VIEW, tenant)]

    async def count_waiting(self) -> int:
        """How many workloads wait."""
        return int(await self.conn.fetchval(COUNT_WAITING))

    async def set_state(
        self, workload_id: str, *, state: str, placement_id: str | None, priority: float | None = None
    ) -> None:
        """Move a workload to a non-terminal state (out of a migration: its pin and avoided GPUs dropped)."""
        await self.conn.execute(SET_STATE, workload_id, state, placement_id, priority)

    async def end_workload(
        self, workload_id: str, *, state: str, outcome: str, reason: str, at: datetime
    ) -> None:
        """Move a workload to a terminal state."""
        await self.conn.execute(END_WORKLOAD, workload_id, state, outcome, reason, at)

    async def start_migration(self, workload_id: str, *, priority: float, avoid_gpu: str) -> None:
        """Mark a workload migrating, its priority pinned and a GPU to avoid."""
        await self.conn.execute(START_MIGRATION, workload_id, priority, [avoid_gpu])

    async def record_waiting(self, rows: Sequence[tuple[str, int, float, str, datetime | None]]) -> None:
        """Store each waiting workload's position, priority, reason and estimated start."""
        if rows:
            await self.conn.execute(RECORD_WAITING, *(list(col) for col in zip(*rows, strict=True)))
