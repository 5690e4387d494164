"""The unit of work: one transaction that holds a state change and the events it causes."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Protocol

import asyncpg

from libs.common.events import Event, encode, envelop, topic_of
from libs.common.observability.tracing import current_traceparent

__all__ = ["PostgresUnitOfWork", "UnitOfWork"]


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
        traceparent = current_traceparent()
        envelope = envelop(
            payload, source=f"/gpucloud/{self._source}", tenant=tenant, traceparent=traceparent, time=time
        )
        await self.conn.execute(
            _INSERT_OUTBOX, envelope.id, topic_of(payload), envelope.subject, encode(envelope), traceparent
        )
        self._emitted = True
        return envelope.id

    async def emit_many(self, payloads: Sequence[Event], *, tenant: str | None = None) -> list[str]:
        """One statement for all of them (one round trip instead of one per event)."""
        if not payloads:
            return []
        traceparent = current_traceparent()
        source = f"/gpucloud/{self._source}"
        envelopes = [envelop(p, source=source, tenant=tenant, traceparent=traceparent) for p in payloads]
        await self.conn.execute(
            _INSERT_OUTBOX_MANY,
            [e.id for e in envelopes],
            [topic_of(p) for p in payloads],
            [e.subject for e in envelopes],
            [encode(e) for e in envelopes],
            [traceparent] * len(envelopes),
        )
        self._emitted = True
        return [e.id for e in envelopes]

    async def commit(self) -> None:
        if self._tx is None:
            raise RuntimeError("nothing to commit")
        if self._emitted:
            # Delivered at commit: wakes the relay at once instead of at its next poll.
            await self.conn.execute("SELECT pg_notify('gpucloud_outbox', current_schema())")
        await self._tx.commit()
        self._tx = None
