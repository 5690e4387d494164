"""The Postgres types the scheduler's stores take and answer, so the layers above never import the driver."""

from __future__ import annotations

from typing import Any, TypeAlias

import asyncpg

__all__ = ["NOTIFY_WAKE", "WAKE_CHANNEL", "Conn", "Pool", "PostgresError"]

#: A connection (inside a unit of work) or the pool (for single-statement reads and writes).
Conn: TypeAlias = "asyncpg.Connection[Any] | asyncpg.Pool[Any]"
Pool: TypeAlias = "asyncpg.Pool[Any]"
#: What a statement that Postgres refused raises.
PostgresError = asyncpg.PostgresError

#: NOTIFY channel that wakes the active placer (payload: the schema, so test schemas never cross).
WAKE_CHANNEL = "gpucloud_scheduler_wake"
#: The wake-up, delivered at commit to whichever replica holds the placer's lease.
NOTIFY_WAKE = "SELECT pg_notify($1, current_schema())"
