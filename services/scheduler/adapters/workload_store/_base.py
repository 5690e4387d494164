"""What every part of the workload store shares: the connection it runs on and the placer's wake-up."""

from __future__ import annotations

import json
from typing import Any

from services.scheduler.adapters.postgres import NOTIFY_WAKE, WAKE_CHANNEL, Conn

__all__ = ["WAKE_CHANNEL", "Rows", "as_json"]


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
