"""The unit of work: one transaction that holds a state change and the events it causes."""

from __future__ import annotations

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

    async def commit(self) -> None:
        """Commit; without it the transaction rolls back on exit."""
        ...

    async def __aenter__(self) -> UnitOfWork: ...

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None: ...


_INSERT_OUTBOX = "INSERT INTO outbox (event_id, topic, key, payload, traceparent) VALUES ($1, $2, $3, $4, $5)"


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

    async def commit(self) -> None:
        if self._tx is None:
            raise RuntimeError("nothing to commit")
        if self._emitted:
            # Delivered at commit: wakes the relay at once instead of at its next poll.
            await self.conn.execute("SELECT pg_notify('gpucloud_outbox', current_schema())")
        await self._tx.commit()
        self._tx = None
