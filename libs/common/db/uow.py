"""The unit of work: one transaction that holds a state change and the events it causes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Protocol, Self, TypeAlias

import asyncpg

from libs.common.events import Event, encode, envelop, topic_of
from libs.common.observability.tracing import current_traceparent

__all__ = ["OnConnection", "OutboxRow", "PostgresUnitOfWork", "UnitOfWork", "outbox_columns", "outbox_row"]

#: One outbox row: event id, logical topic, key, payload (the encoded envelope), traceparent.
OutboxRow: TypeAlias = tuple[str, str, str, bytes, "str | None"]


def outbox_row(
    payload: Event, *, source: str, tenant: str | None = None, time: datetime | None = None
) -> OutboxRow:
    """The outbox row of one outgoing event: a fresh envelope from ``source`` under the current trace.

    What ``emit`` writes; services that write their outbox rows within a larger statement build them here.
    """
    traceparent = current_traceparent()
    envelope = envelop(
        payload, source=f"/gpucloud/{source}", tenant=tenant, traceparent=traceparent, time=time
    )
    return (envelope.id, topic_of(payload), envelope.subject, encode(envelope), traceparent)


def outbox_columns(rows: Sequence[OutboxRow]) -> list[list[Any]]:
    """The five columns of ``rows``, as the arrays an ``unnest`` insert into the outbox takes."""
    return [[row[i] for row in rows] for i in range(5)]


class OnConnection(Protocol):
    """Whatever holds a connection: the self type of a mixin that builds SQL-only stores on it, shared by a
    service's Postgres unit of work and its fake (whose ``conn`` raises unless a test gave it one)."""

    @property
    def conn(self) -> Any: ...


class UnitOfWork(Protocol):
    """A transaction: state changes and outgoing events commit together or not at all."""

    @property
    def conn(self) -> asyncpg.Connection[Any]:
        """The connection inside the transaction."""
        ...

    async def emit(self, payload: Event, *, tenant: str | None = None, time: datetime | None = None) -> str:
        """Record an outgoing event in the outbox; returns the event id.

        ``time`` is when the fact happened (default: now); events about one instant share it. The row is
        written with the commit, in the same transaction, in the order of the calls.
        """
        ...

    async def emit_many(self, payloads: Sequence[Event], *, tenant: str | None = None) -> list[str]:
        """Record several outgoing events, in order, as ``emit`` would one by one; returns their ids."""
        ...

    async def commit(self) -> None:
        """Commit; without it the transaction rolls back on exit."""
        ...

    def after_commit(self, action: Callable[[], None]) -> None:
        """Run ``action`` once this transaction has committed, never if it rolls back: for what may only
        count what is durable (a metric of charges posted)."""
        ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None: ...


#: A unit of work's events, in emitted order, as one statement that also wakes the relay at commit.
_WRITE_OUTBOX = """
WITH o AS (
    INSERT INTO outbox (event_id, topic, key, payload, traceparent)
    SELECT e, t, k, p, tp
    FROM unnest($1::uuid[], $2::text[], $3::text[], $4::bytea[], $5::text[])
        WITH ORDINALITY AS r(e, t, k, p, tp, n)
    ORDER BY n
)
SELECT pg_notify('gpucloud_outbox', current_schema())
"""


class PostgresUnitOfWork:
    """A unit of work on a pooled connection; rolls back unless ``commit`` was called.

    Events are kept until the commit and written then in one statement (with the relay's NOTIFY), not one
    round trip per ``emit``: a consumer batch or a pass that emits many events pays for one.
    """

    def __init__(self, *, pool: asyncpg.Pool[Any], source: str) -> None:
        self._pool = pool
        self._source = source
        self._conn: asyncpg.Connection[Any] | None = None
        self._tx: Any = None
        self._outbox: list[OutboxRow] = []
        self._after_commit: list[Callable[[], None]] = []

    @property
    def conn(self) -> asyncpg.Connection[Any]:
        if self._conn is None:
            raise RuntimeError("unit of work used outside `async with`")
        return self._conn

    async def __aenter__(self) -> Self:
        self._conn = await self._pool.acquire()
        self._tx = self._conn.transaction()
        await self._tx.start()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._after_commit = []  # not committed by now: rolled back
        try:
            if self._tx is not None:
                await self._tx.rollback()
        finally:
            if self._conn is not None:
                await self._pool.release(self._conn)
            self._conn = self._tx = None
            self._outbox = []

    async def emit(self, payload: Event, *, tenant: str | None = None, time: datetime | None = None) -> str:
        if self._tx is None:
            raise RuntimeError("unit of work used outside `async with` or after its commit")
        row = outbox_row(payload, source=self._source, tenant=tenant, time=time)
        self._outbox.append(row)
        return row[0]

    async def emit_many(self, payloads: Sequence[Event], *, tenant: str | None = None) -> list[str]:
        return [await self.emit(p, tenant=tenant) for p in payloads]

    async def commit(self) -> None:
        if self._tx is None:
            raise RuntimeError("nothing to commit")
        if self._outbox:
            # The NOTIFY is delivered at commit: it wakes the relay at once instead of at its next poll.
            await self.conn.execute(_WRITE_OUTBOX, *outbox_columns(self._outbox))
            self._outbox = []
        await self._tx.commit()
        self._tx = None
        actions, self._after_commit = self._after_commit, []
        for action in actions:
            action()

    def after_commit(self, action: Callable[[], None]) -> None:
        self._after_commit.append(action)
