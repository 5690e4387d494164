"""The connection type every recovery store and query takes (a plain connection or one from the pool)."""

from __future__ import annotations

from typing import Any, TypeAlias

import asyncpg

__all__ = ["Conn"]

Conn: TypeAlias = "asyncpg.Connection[Any] | asyncpg.pool.PoolConnectionProxy[Any]"
