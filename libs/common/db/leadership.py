"""One active worker at a time: a lease on a Postgres session advisory lock, confirmed and fenced.

The lock is ``pg_try_advisory_lock(hashtext(key))`` on one dedicated session, so it lives exactly as long
as that session: a killed process, a terminated backend, a restarted Postgres or a cut network ends both,
and a standby takes the lock at its next try. The holder cannot feel that loss by itself, so a lease
offers two checks: ``confirm`` (one statement on the lock's own session, bounded, so a cut network does
not wait for TCP to give up) between units of work, and ``fence`` (inside a writer's transaction: is the
lock still this session's?) before a write that a successor must never see twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import asyncpg

from libs.common.db.locks import advisory_lock_holder

__all__ = ["LeadershipLost", "Lease", "lead"]

log = logging.getLogger(__name__)

#: Longest wait for the lock's session to answer before the lease counts as lost.
CHECK_TIMEOUT_S = 5.0
_TRY = "SELECT pg_try_advisory_lock(hashtext($1))"
_UNLOCK = "SELECT pg_advisory_unlock(hashtext($1))"
#: What a cut session raises. ``InternalClientError`` ("cannot switch to state ...; another operation in
#: progress") comes when the server's goodbye for a terminated backend lands while a statement is in flight:
#: the connection's protocol state is then unknown, and the lease is treated as gone.
_GONE = (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.InternalClientError)


class LeadershipLost(RuntimeError):
    """The lease's lock session ended, or the lock is another session's: another worker may lead now."""


@dataclass(frozen=True, slots=True)
class Lease:
    """Proof of holding the lock ``key`` on the session ``conn`` (backend ``pid``)."""

    conn: asyncpg.Connection[Any]
    key: str
    pid: int
    check_timeout_s: float = CHECK_TIMEOUT_S

    @property
    def open(self) -> bool:
        """False once the lock's connection is known to be closed (then the lock is gone).

        A pool's connection that ``confirm`` terminated went back to its pool at once, and asking its proxy
        anything raises ``InterfaceError``: that connection is closed too.
        """
        try:
            return not self.conn.is_closed()
        except asyncpg.InterfaceError:
            return False

    async def confirm(self) -> None:
        """Raise ``LeadershipLost`` unless the lock's session still answers within the check timeout."""
        if not self.open:
            raise LeadershipLost(f"the lock connection of {self.key} is closed")
        try:
            await self.conn.execute("SELECT 1", timeout=self.check_timeout_s)
        except _GONE as exc:
            self.conn.terminate()  # its state is unknown: never send on it again
            raise LeadershipLost(f"the lock session of {self.key} is gone: {exc!r}") from exc

    async def fence(self, conn: asyncpg.Connection[Any]) -> None:
        """Raise ``LeadershipLost`` unless the lock is still this lease's session's, read on ``conn``.

        Run it inside the transaction of the write it guards: a successor that took the lock since the
        last ``confirm`` then makes this write fail instead of land beside its own.
        """
        if await advisory_lock_holder(conn, self.key) != self.pid:
            raise LeadershipLost(f"the lock {self.key} is no longer this session's: nothing written")


@asynccontextmanager
async def lead(
    conn: asyncpg.Connection[Any],
    *,
    key: str,
    stop: asyncio.Event,
    wait: Callable[[], Awaitable[object]],
    check_timeout_s: float = CHECK_TIMEOUT_S,
) -> AsyncIterator[Lease | None]:
    """Take the lock ``key`` on ``conn``, trying again after each ``wait()``; the lease, or None on stop.

    On leaving, the lock is given back if its session is still open (bounded by the check timeout), so
    a standby takes over at once rather than when the connection closes.
    """
    while not await conn.fetchval(_TRY, key):
        if stop.is_set():
            yield None
            return
        await wait()
        if stop.is_set():
            yield None
            return
    lease = Lease(conn=conn, key=key, pid=conn.get_server_pid(), check_timeout_s=check_timeout_s)
    try:
        yield lease
    finally:
        if lease.open:
            with contextlib.suppress(*_GONE):
                await conn.execute(_UNLOCK, key, timeout=check_timeout_s)
