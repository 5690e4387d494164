"""asyncpg SQL the task waiters share: which of many workloads have ended, in one statement."""

from __future__ import annotations

from collections.abc import Sequence

from services.scheduler.adapters.postgres import Conn

__all__ = ["ENDED", "TaskReads"]

ENDED = """
SELECT workload_id FROM workloads
WHERE workload_id = ANY($1::text[]) AND state IN ('completed', 'failed', 'cancelled')
"""


class TaskReads:
    """Reads on the pool (one statement each; nothing is held between them)."""

    def __init__(self, conn: Conn) -> None:
        self.conn = conn

    async def ended(self, workload_ids: Sequence[str]) -> set[str]:
        """The ids among ``workload_ids`` whose workload is completed, failed or cancelled."""
        return {r["workload_id"] for r in await self.conn.fetch(ENDED, list(workload_ids))}
