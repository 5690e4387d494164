"""The unit of work: one transaction that holds a state change and the events it causes."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Protocol, TypeAlias

import asyncpg

from libs.common.events import Event, encode, envelop, topic_of
from libs.common.observability.tracing import current_traceparent

__all__ = ["OutboxRow", "PostgresUnitOfWork", "UnitOfWork", "outbox_columns", "outbox_row"]

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


class UnitOfWork(Protocol):
    """A transaction: state changes and outgoing events commit together or not at all."""

    @property
    def conn(self) -> asyncpg.Connection[Any]:
        """The connection inside the transaction."""
        ...

    async def emit(self, payload: Event, *, tenant: str | None = None, time: datetime | None = None) -> str:
        """Record an outgoing event in the outbox; returns the event id.

        ``time`` is when the fact happened (default: now); events about one instant share it.
        """
        ...

    async def emit_many(self, payloads: Sequence[Event], *, tenant: str | None = None) -> list[str]:
        """Record several outgoing events, in order, as ``emit`` would one by one; returns their ids."""
        ...

    async def commit(self) -> None:
        """Commit; without it the transaction rolls back on exit."""
        ...

    async def __aenter__(self) -> UnitOfWork: ...

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None: ...


_INSERT_OUTBOX = "INSERT INTO outbox (event_id, topic, key, payload, traceparent) VALUES ($1, $2, $3, $4, $5)"
_INSERT_OUTBOX_MANY = """
INSERT INTO outbox (event_id, topic, key, payload, traceparent)
SELECT e, t, k, p, tp
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::bytea[], $5::text[])
    WITH ORDINALITY AS r(e, t, k, p, tp, n)
ORDER BY n
"""


class PostgresUnitOfWork:
    """A unit of work on a pooled connection; rolls back unless ``commit`` was called."""

    def __init__(self, *, pool: asyncpg.Pool[Any], source: str) -> None:
        self._pool = pool
        self._source = source
        self._conn: asyncpg.Connection[Any] | None = None
        self._tx: Any = None
        self._emitted = False

    @property
    def conn(self) -> asyncpg.Connection[Any]:
        if self._conn is None:
            raise RuntimeError("unit of work used outside `async with`")
        return self._conn

    async def __aenter__(self) -> PostgresUnitOfWork:
        self._conn = await self._pool.acquire()
        self._tx = self._conn.transaction()
        await self._tx.start()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if self._tx is not None:
                await self._tx.rollback()
        finally:
            if self._conn is not None:
                await self._pool.release(self._conn)
            self._conn = self._tx = None

    async def emit(self, payload: Event, *, tenant: str | None = None, time: datetime | None = None) -> str:
        row = outbox_row(payload, source=self._source, tenant=tenant, time=time)
        await self.conn.execute(_INSERT_OUTBOX, *row)
        self._emitted = True
        return row[0]

    async def emit_many(self, payloads: Sequence[Event], *, tenant: str | None = None) -> list[str]:
        """One statement for all of them (one round trip instead of one per event)."""
        if not payloads:
            return []
        rows = [outbox_row(p, source=self._source, tenant=tenant) for p in payloads]
        await self.conn.execute(_INSERT_OUTBOX_MANY, *outbox_columns(rows))
        self._emitted = True
        return [row[0] for row in rows]

    async def commit(self) -> None:
        if self._tx is None:
            raise RuntimeError("nothing to commit")
        if self._emitted:
            # Delivered at commit: wakes the relay at once instead of at its next poll.
            await self.conn.execute("SELECT pg_notify('gpucloud_outbox', current_schema())")
        await self._tx.commit()
        self._tx = None
