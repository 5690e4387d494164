"""Session advisory locks taken as ``pg_try_advisory_lock(hashtext(key))``: who holds one now."""

from __future__ import annotations

from typing import Any

import asyncpg

__all__ = ["advisory_lock_holder"]

# pg_locks shows a bigint key as two oids: its high half in classid, its low half in objid.
_HOLDER = """
SELECT pid FROM pg_locks
 WHERE locktype = 'advisory' AND granted
   AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
   AND ((classid::bigint << 32) | objid::bigint) = hashtext($1)::bigint
"""


async def advisory_lock_holder(conn: asyncpg.Connection[Any] | asyncpg.Pool[Any], key: str) -> int | None:
    """The backend pid holding the session advisory lock on ``hashtext(key)``, or None."""
    pid = await conn.fetchval(_HOLDER, key)
    return int(pid) if pid is not None else None
