"""The node agent's reports as single statements: a run started, a run ended (with its accounting)."""

from __future__ import annotations

from datetime import datetime

from services.scheduler.adapters.workload_store._base import WAKE_CHANNEL, Rows
from services.scheduler.domain.stored import RunEnd, RunStart

__all__ = ["RunRows"]

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


class RunRows(Rows):
    """A workload's run on its current placement."""

    async def start_run(self, workload_id: str, *, placement_id: str, at: datetime) -> RunStart | None:
        """Mark the current placement started and the workload running; None when the report is stale."""
        row = await self.conn.fetchrow(START_WORKLOAD, workload_id, placement_id, at)
        return None if row is None else RunStart(*row)

    async def end_run(
        self, workload_id: str, *, placement_id: str, outcome: str, reason: str, at: datetime
    ) -> RunEnd | None:
        """End the current placement and the workload, free its slots, lock the tenant's usage row and
        wake the placer; None when the report is stale or the placement had already ended."""
        row = await self.conn.fetchrow(
            END_WORKLOAD_RUN, workload_id, placement_id, at, outcome, reason, WAKE_CHANNEL
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
