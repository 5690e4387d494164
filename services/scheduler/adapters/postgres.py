"""The Postgres types the scheduler's stores take and answer, so the layers above never import the driver."""

from __future__ import annotations

from typing import Any, TypeAlias

import asyncpg

__all__ = ["Conn", "Pool", "PostgresError", "Record"]

#: A connection (inside a unit of work) or the pool (for single-statement reads and writes).
Conn: TypeAlias = "asyncpg.Connection[Any] | asyncpg.Pool[Any]"
Pool: TypeAlias = "asyncpg.Pool[Any]"
#: A row as the stores answer it.
Record: TypeAlias = asyncpg.Record
#: What a statement that Postgres refused raises.
PostgresError = asyncpg.PostgresError
