"""What every part of the workload store shares: the connection it runs on and the placer's wake-up."""

from __future__ import annotations

import json
from typing import Any

from services.scheduler.adapters.postgres import NOTIFY_WAKE, WAKE_CHANNEL, Conn

__all__ = ["CLEAR_RUN_FACTS", "RUN_FACTS", "WAKE_CHANNEL", "Rows", "as_json"]

#: The host's facts about a workload's current run (StoredWorkload's host_* and exit_* columns).
RUN_FACTS = (
    "host_pid",
    "host_container_id",
    "host_runner",
    "host_notes",
    "exit_reason",
    "exit_code",
    "exit_signal",
)
#: An UPDATE's assignments forgetting them: a new placement is a new run.
CLEAR_RUN_FACTS = ", ".join(f"{c} = NULL" for c in RUN_FACTS)


def as_json(value: Any) -> str:
    """A JSON column's text (datetimes and decimals as strings)."""
    return json.dumps(value, default=str)


class Rows:
    """Statements on one connection (or the pool, for reads); never commits."""

    def __init__(self, conn: Conn) -> None:
        self.conn = conn

    async def wake_placer(self) -> None:
        """Wake the active placer (delivered at commit, to whichever replica holds the lock)."""
        await self.conn.execute(NOTIFY_WAKE, WAKE_CHANNEL)
