"""Placement rows and the slots they hold: placing (one or a batch), ending, migrating, preemption, quota."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from libs.common.db.uow import OutboxRow, outbox_columns
from services.scheduler.adapters.workload_store._base import CLEAR_RUN_FACTS, Rows, as_json
from services.scheduler.domain.stored import CompletedRun, StoredPlacement, Unreleased, columns_of

__all__ = ["PlacementRows"]

#: A placement's columns in StoredPlacement's order.
PLACEMENT = columns_of(StoredPlacement)

INSERT_PLACEMENT = """
INSERT INTO placements (placement_id, workload_id, tenant_id, node, grants, gpus, units_milli, models,
    priority, preemptible, ends_at, placed_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
"""
INSERT_SLOTS = """
INSERT INTO held_slots (gpu_uuid, slot, placement_id)
SELECT g, s, $3 FROM unnest($1::text[], $2::text[]) AS v(g, s)
"""
GET_PLACEMENT = f"SELECT {PLACEMENT} FROM placements WHERE placement_id = $1 FOR UPDATE"
LIVE_PLACEMENT_OF = "SELECT placement_id FROM placements WHERE workload_id = $1 AND ended_at IS NULL"
PLACEMENT_GRANTS = "SELECT grants FROM placements WHERE placement_id = $1"
LIVE_PLACEMENTS = f"SELECT {PLACEMENT} FROM placements WHERE ended_at IS NULL"
#: Each live placement's id and row version: ``xmin``, the transaction that wrote the row as it is now
#: (every UPDATE writes a new version, with its own transaction's id).
LIVE_VERSIONS = "SELECT placement_id, xmin::text FROM placements WHERE ended_at IS NULL"
LIVE_BY_ID = f"""
SELECT xmin::text, {PLACEMENT} FROM placements WHERE placement_id = ANY($1::text[]) AND ended_at IS NULL
"""
END_PLACEMENT = f"""
UPDATE placements SET ended_at = $2, outcome = $3, quota_released = $4 WHERE placement_id = $1
  AND ended_at IS NULL RETURNING {PLACEMENT}
"""
FREE_SLOTS = "DELETE FROM held_slots WHERE placement_id = $1"
#: The live placements of a node that hold their slots (a migrating one freed them), locked in id order.
LIVE_ON_NODE = f"""
SELECT {PLACEMENT} FROM placements WHERE node = $1 AND ended_at IS NULL AND NOT migrating
ORDER BY placement_id FOR UPDATE
"""
FREE_SLOTS_OF = "DELETE FROM held_slots WHERE placement_id = ANY($1::text[])"
SET_GRANTS = """
UPDATE placements p SET grants = v.grants::jsonb FROM unnest($1::text[], $2::text[]) AS v(pid, grants)
WHERE p.placement_id = v.pid
"""
HOLD_SLOTS = """
INSERT INTO held_slots (gpu_uuid, slot, placement_id)
SELECT g, s, pid FROM unnest($1::text[], $2::text[], $3::text[]) AS v(g, s, pid)
"""
MARK_MIGRATING = "UPDATE placements SET migrating = true WHERE placement_id = $1"
SCHEDULE_PREEMPTION = f"""
UPDATE placements SET preempt_deadline = $2, preempted_for = $3
WHERE placement_id = $1 AND ended_at IS NULL AND preempt_deadline IS NULL RETURNING {PLACEMENT}
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
SELECT w.spec, p.models, p.gpus, p.started_at, p.ended_at
FROM placements p JOIN workloads w USING (workload_id)
WHERE p.tenant_id = $1 AND p.outcome = 'completed' AND p.started_at IS NOT NULL
ORDER BY p.ended_at DESC LIMIT 500
"""
#: Several placements as one statement, so one implicit transaction: the workloads still queued are locked
#: (in id order, so two lockers never deadlock), and for those only the placement rows, held slots (the
#: primary key refuses a slot held twice, the partial unique index a second live placement), workload
#: states and outbox rows ($21: each outbox row's workload) are written; the relay's NOTIFY is delivered
#: at commit. Any violation fails the whole statement. Answers the workloads placed.
PLACE_MANY = f"""
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
        estimated_start = NULL, priority = v.prio, {CLEAR_RUN_FACTS}
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
SELECT coalesce(array_agg(workload_id), '{{}}') AS placed, pg_notify('gpucloud_outbox', current_schema())
FROM p
"""


class PlacementRows(Rows):
    """The placements and held_slots tables."""

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
        args.append([as_json(r["grants"]) for r in rows])
        args += [[r[c] for r in rows] for c in ("gpus", "units_milli")]
        args.append([as_json(r["models"]) for r in rows])
        args += [[r[c] for r in rows] for c in ("priority", "preemptible", "ends_at", "placed_at")]
        args += [[s[i] for s in slots] for i in range(3)]
        args += outbox_columns([o for _w, o in outbox])
        args.append([w for w, _o in outbox])
        return set(await self.conn.fetchval(PLACE_MANY, *args))

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

    async def placement(self, placement_id: str) -> StoredPlacement | None:
        """A placement row locked for this transaction."""
        found = await self.conn.fetchrow(GET_PLACEMENT, placement_id)
        return None if found is None else StoredPlacement(*found)

    async def live_placement_of(self, workload_id: str) -> str | None:
        """The id of a workload's live placement, unlocked."""
        found: str | None = await self.conn.fetchval(LIVE_PLACEMENT_OF, workload_id)
        return found

    async def placement_grants(self, placement_id: str) -> list[dict[str, Any]] | None:
        """A placement's grants, unlocked; None when there is no such placement."""
        found = await self.conn.fetchrow(PLACEMENT_GRANTS, placement_id)
        return None if found is None else list(found["grants"])

    async def live_placements(self) -> list[StoredPlacement]:
        """Every placement not ended."""
        return [StoredPlacement(*r) for r in await self.conn.fetch(LIVE_PLACEMENTS)]

    async def live_placement_versions(self) -> list[tuple[str, str]]:
        """Every placement not ended, as (placement id, row version): what changed since a read shows."""
        return [(r[0], r[1]) for r in await self.conn.fetch(LIVE_VERSIONS)]

    async def live_placements_by_id(self, placement_ids: Sequence[str]) -> list[tuple[str, StoredPlacement]]:
        """These placements with their row versions, those not ended."""
        rows = await self.conn.fetch(LIVE_BY_ID, placement_ids)
        return [(r[0], StoredPlacement(*tuple(r)[1:])) for r in rows]

    async def live_placements_on(self, node: str) -> list[StoredPlacement]:
        """The live placements of a node holding their slots (not migrating), locked in id order."""
        return [StoredPlacement(*r) for r in await self.conn.fetch(LIVE_ON_NODE, node)]

    async def regrant(self, grants: Mapping[str, Sequence[Mapping[str, Any]]]) -> None:
        """Give each placement these grants and the slots they name; all slots are freed before any is
        held again, so placements may swap them (a slot held twice raises UniqueViolationError)."""
        pids = list(grants)
        slots = [(g["gpu"], g["slot"], pid) for pid in pids for g in grants[pid]]
        await self.conn.execute(FREE_SLOTS_OF, pids)
        await self.conn.execute(SET_GRANTS, pids, [as_json(list(grants[pid])) for pid in pids])
        await self.conn.execute(HOLD_SLOTS, *([s[i] for s in slots] for i in range(3)))

    async def end_placement(
        self, placement_id: str, *, outcome: str, at: datetime, released: bool = False
    ) -> StoredPlacement | None:
        """End a live placement and free its slots; None when it had already ended."""
        row = await self.conn.fetchrow(END_PLACEMENT, placement_id, at, outcome, released)
        await self.conn.execute(FREE_SLOTS, placement_id)
        return None if row is None else StoredPlacement(*row)

    async def mark_migrating(self, placement_id: str) -> None:
        """Free a migrating placement's slots: the workload is being re-placed."""
        await self.conn.execute(MARK_MIGRATING, placement_id)
        await self.conn.execute(FREE_SLOTS, placement_id)

    async def schedule_preemption(
        self, placement_id: str, *, deadline: datetime, preempted_for: str
    ) -> StoredPlacement | None:
        """Set a victim's deadline once; None when already set or ended."""
        row = await self.conn.fetchrow(SCHEDULE_PREEMPTION, placement_id, deadline, preempted_for)
        return None if row is None else StoredPlacement(*row)

    async def expired_preemptions(self, *, now: datetime) -> list[str]:
        """Live placements whose grace period is over."""
        return [r["placement_id"] for r in await self.conn.fetch(EXPIRED_PREEMPTIONS, now)]

    async def unreleased(self, *, limit: int) -> list[Unreleased]:
        """Up to ``limit`` ended placements whose quota Redis still counts."""
        return [Unreleased(*r) for r in await self.conn.fetch(UNRELEASED, limit)]

    async def mark_released(self, placement_ids: Sequence[str]) -> None:
        """Record that Redis gave these placements' quota back."""
        await self.conn.execute(MARK_RELEASED, list(placement_ids))

    async def history(self, tenant: str) -> list[CompletedRun]:
        """The tenant's completed placements that ran, newest first."""
        return [CompletedRun(*r) for r in await self.conn.fetch(HISTORY, tenant)]
