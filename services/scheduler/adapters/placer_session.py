"""The placer's own Postgres session: where its leadership lease lives, and the LISTEN that wakes it.

The lock lives on this dedicated connection (never a pooled one), so it goes the moment the holder's
process dies. The lease itself is ``libs.common.db.leadership``'s.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import asyncpg

from services.scheduler.adapters.workload_store import WAKE_CHANNEL

__all__ = ["PlacerSession"]


class PlacerSession:
    """One dedicated connection: what the placer's lease is taken on, and where wake-ups arrive."""

    def __init__(self, conn: asyncpg.Connection[Any]) -> None:
        self.conn = conn
        self._listener: Callable[[object, int, str, str], None] | None = None

    @classmethod
    async def connect(cls, dsn: str, *, schema: str) -> PlacerSession:
        """Open the dedicated connection (named as the schema's pools are, in pg_stat_activity)."""
        conn: asyncpg.Connection[Any] = await asyncpg.connect(
            dsn, server_settings={"application_name": f"gpucloud-{schema}"}
        )
        return cls(conn)

    async def listen(self, on_payload: Callable[[str], None]) -> None:
        """Call ``on_payload`` with the payload of every wake-up NOTIFY."""

        def on_notify(_c: object, _pid: int, _channel: str, payload: str) -> None:
            on_payload(payload)

        self._listener = on_notify
        await self.conn.add_listener(WAKE_CHANNEL, on_notify)

    async def unlisten(self) -> None:
        """Stop the wake-up listener."""
        if self._listener is not None and not self.conn.is_closed():
            await self.conn.remove_listener(WAKE_CHANNEL, self._listener)
            self._listener = None

    async def close(self) -> None:
        """Close the connection (which drops the lock if still held)."""
        await self.conn.close()
