"""The node agent's reports as single statements: a run started, a run ended (with its accounting), and
a late exit's facts about a workload already ended."""

from __future__ import annotations

from datetime import datetime

from services.scheduler.adapters.workload_store._base import WAKE_CHANNEL, Rows
from services.scheduler.domain.stored import RunEnd, RunExit, RunHost, RunStart

__all__ = ["RunRows"]

#: The agent's start, as one statement: only for the workload's current placement while it is placed
#: (the row locked, so a concurrent exit waits), with the host's process or container ($4-$6) and its
#: notes ($7); answers the
#: workload's tenant and trace, or nothing.
START_WORKLOAD = """
WITH w AS (
    SELECT workload_id, tenant_id, traceparent FROM workloads
    WHERE workload_id = $1 AND placement_id = $2 AND state = 'placed'
    FOR UPDATE
), p AS (
    UPDATE placements SET started_at = $3
    WHERE placement_id = $2 AND started_at IS NULL AND EXISTS (SELECT 1 FROM w)
), s AS (
    UPDATE workloads x SET state = 'running', wait_reason = NULL, position = NULL, estimated_start = NULL,
        host_pid = $4, host_container_id = $5, host_runner = $6, host_notes = $7
    FROM w WHERE x.workload_id = w.workload_id
)
SELECT tenant_id, traceparent FROM w
"""
#: The agent's exit, as one statement: the workload (its current placement, placed or running) locked,
#: the placement ended and its slots freed, the workload ended, and the tenant's usage row locked for
#: the accrual that follows, and the placer woken (at commit) for the freed GPUs; the host's exit facts
#: ($7-$9) kept with the workload. No row (and no wake-up)
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
        wait_reason = NULL, estimated_start = NULL, exit_reason = $7, exit_code = $8, exit_signal = $9
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
#: The host's exit facts about a workload that had already ended on this placement (a cancel ends it at
#: once; the host reports the process's end after its grace): they complete its terminal view.
RECORD_EXIT = """
UPDATE workloads SET exit_reason = $3, exit_code = $4, exit_signal = $5
WHERE workload_id = $1 AND placement_id = $2 AND state IN ('completed', 'failed', 'cancelled')
"""


class RunRows(Rows):
    """A workload's run on its current placement."""

    async def start_run(
        self, workload_id: str, *, placement_id: str, at: datetime, host: RunHost | None = None
    ) -> RunStart | None:
        """Mark the current placement started and the workload running, with the host's process or
        container; None when the report is stale."""
        h = host or RunHost()
        row = await self.conn.fetchrow(
            START_WORKLOAD, workload_id, placement_id, at, h.pid, h.container_id, h.runner, list(h.notes)
        )
        return None if row is None else RunStart(*row)

    async def end_run(
        self,
        workload_id: str,
        *,
        placement_id: str,
        outcome: str,
        reason: str,
        at: datetime,
        exit_facts: RunExit | None = None,
    ) -> RunEnd | None:
        """End the current placement and the workload with the host's exit facts, free its slots, lock
        the tenant's usage row and wake the placer; None when the report is stale or the placement had
        already ended."""
        e = exit_facts or RunExit()
        row = await self.conn.fetchrow(
            END_WORKLOAD_RUN,
            workload_id,
            placement_id,
            at,
            outcome,
            reason,
            WAKE_CHANNEL,
            e.reason,
            e.code,
            e.signal,
        )
        if row is None:
            return None
        usage = row["decayed_unit_hours"]
        return RunEnd(
            tenant_id=row["tenant_id"],
            traceparent=row["traceparent"],
            started_at=row["started_at"],
            placed_at=row["placed_at"],
            units_milli=int(row["units_milli"]),
            decayed_unit_hours=None if usage is None else float(usage),
            as_of=row["as_of"],
        )

    async def record_exit(self, workload_id: str, *, placement_id: str, exit_facts: RunExit) -> bool:
        """Keep the host's exit facts on a workload that already ended on this placement; False when it
        has not ended, or ended on another placement (nothing written)."""
        status: str = await self.conn.execute(
            RECORD_EXIT, workload_id, placement_id, exit_facts.reason, exit_facts.code, exit_facts.signal
        )
        return status.endswith(" 1")
