"""The outbox relay: publishes committed outbox rows with acks=all, then marks them sent.

A crash after publishing and before marking republishes the rows on restart; consumers dedupe by
event id, so delivery is at least once and application exactly once. One relay per schema works
at a time, which keeps the per-key order of the outbox: a running relay holds a session advisory lock on
its listening connection (a standby takes over when that connection goes), and a one-off
``publish_batch`` takes the same lock for its transaction.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import asyncpg
from aiokafka import AIOKafkaProducer
from opentelemetry.trace import SpanKind

from libs.common.db.leadership import Lease, lead
from libs.common.db.pool import QUEUE_READS
from libs.common.observability.metrics import EVENTS_PRODUCED, OUTBOX_BACKLOG
from libs.common.observability.tracing import current_traceparent, kafka_headers, span_from_traceparent
from libs.common.stopping import sleep_or_stop, wait_for_wake

__all__ = ["OutboxRelay"]

log = logging.getLogger(__name__)

_SELECT = (
    "SELECT seq, event_id, topic, key, payload, traceparent FROM outbox "
    "WHERE sent_at IS NULL ORDER BY seq LIMIT $1"
)
_MARK = "UPDATE outbox SET sent_at = now() WHERE seq = ANY($1::bigint[])"
_PRUNE = "DELETE FROM outbox WHERE sent_at < now() - make_interval(secs => $1)"
_CHANNEL = "gpucloud_outbox"
#: The relay's connection runs only _SELECT (through the unsent-rows index) and _MARK (by primary key), so
#: sequential scans can be ruled out there; without statistics the planner may prefer one to the index.
_SESSION = {**QUEUE_READS, "enable_seqscan": "off"}


async def _configure(conn: asyncpg.Connection[Any], *, local: bool) -> None:
    """Apply ``_SESSION`` to the connection, or to its transaction only (``local``)."""
    names, values = list(_SESSION), list(_SESSION.values())
    await conn.execute(
        "SELECT set_config(n, v, $3) FROM unnest($1::text[], $2::text[]) AS s(n, v)", names, values, local
    )


class OutboxRelay:
    """Moves outbox rows of one schema to Kafka."""

    def __init__(
        self,
        *,
        pool: asyncpg.Pool[Any],
        producer: AIOKafkaProducer,
        service: str,
        schema: str,
        topic_prefix: str = "",
        batch_size: int = 500,
        poll_interval_s: float = 0.5,
        retention_s: float = 3600.0,
        housekeeping_interval_s: float = 5.0,
    ) -> None:
        self._pool = pool
        self._producer = producer
        self._service = service
        self._schema = schema
        self._prefix = topic_prefix
        self._batch_size = batch_size
        self._poll_interval_s = poll_interval_s
        self._retention_s = retention_s
        self._housekeeping_interval_s = housekeeping_interval_s
        self._wake = asyncio.Event()

    async def run(self, stop: asyncio.Event) -> None:
        """Publish until ``stop`` is set; wakes on NOTIFY and polls as a fallback.

        While another relay of the schema holds the lock this one stands by, trying again at each
        wake-up. A lost connection is replaced after the poll interval.
        """
        while not stop.is_set():
            try:
                await self._run_on_connection(stop)
            except (TimeoutError, OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                log.warning("outbox relay lost its connection, reconnecting: %s", exc)
                await sleep_or_stop(stop, self._poll_interval_s)

    async def publish_batch(self) -> int:
        """Publish one batch of unsent rows, unless a running relay holds the schema; returns how many."""
        async with self._pool.acquire() as conn, conn.transaction():
            if not await conn.fetchval("SELECT pg_try_advisory_xact_lock(hashtext($1))", self._lock_key):
                return 0
            await _configure(conn, local=True)
            return await self._publish_from(conn)

    async def _run_on_connection(self, stop: asyncio.Event) -> None:
        conn = await self._pool.acquire()
        try:
            # The unsent rows are the tail of a table that keeps an hour of sent ones: see _SESSION
            # (reset below, before the connection goes back to the pool).
            await _configure(conn, local=False)
            await conn.add_listener(_CHANNEL, self._on_notify)
            stand_by = lambda: self._stand_by(stop)  # noqa: E731  # the wait between two tries of the lock
            while not stop.is_set():
                async with lead(conn, key=self._lock_key, stop=stop, wait=stand_by) as lease:
                    if lease is not None:
                        await self._lead(lease, stop)
                if conn.is_closed():
                    raise asyncpg.InterfaceError("the relay's connection was closed")
        finally:
            if not conn.is_closed():
                with contextlib.suppress(OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
                    await conn.remove_listener(_CHANNEL, self._on_notify)
                    await conn.execute("; ".join(f"RESET {name}" for name in _SESSION))
            await self._pool.release(conn)

    async def _lead(self, lease: Lease, stop: asyncio.Event) -> None:
        """Publish batches over the lock's own connection, two statements each (no transaction needed:
        marking after publishing is what makes delivery at least once)."""
        conn, housekeeping_at = lease.conn, 0.0
        while not stop.is_set() and lease.open:
            now = asyncio.get_running_loop().time()
            if now >= housekeeping_at:
                housekeeping_at = now + self._housekeeping_interval_s
                await self._housekeeping()
            # Cleared before the batch reads the outbox, so a NOTIFY for rows committed while the
            # batch runs is kept and the next wait returns at once (clearing after the batch lost
            # those wake-ups and left such rows waiting for the fallback poll).
            self._wake.clear()
            try:
                sent = await self._publish_from(conn)
            except (TimeoutError, OSError, asyncpg.PostgresError) as exc:
                log.warning("outbox relay batch failed, retrying: %s", exc)
                sent = 0
                await sleep_or_stop(stop, self._poll_interval_s)
            if sent < self._batch_size:
                await self._idle(stop)

    async def _publish_from(self, conn: asyncpg.Connection[Any]) -> int:
        rows = await conn.fetch(_SELECT, self._batch_size)
        if rows:
            await self._publish(rows)
            await self._mark_sent(conn, [r["seq"] for r in rows])
        return len(rows)

    async def backlog(self) -> int:
        """Rows not yet published (also exported as a gauge)."""
        count = int(await self._pool.fetchval("SELECT count(*) FROM outbox WHERE sent_at IS NULL"))
        OUTBOX_BACKLOG.labels(self._service).set(count)
        return count

    async def prune(self) -> int:
        """Delete rows sent longer ago than the retention; returns how many."""
        result = await self._pool.execute(_PRUNE, self._retention_s)
        return int(result.split()[-1])

    async def _housekeeping(self) -> None:
        """Refresh the backlog gauge and drop rows sent longer ago than the retention."""
        try:
            await self.backlog()
            await self.prune()
        except (OSError, asyncpg.PostgresError) as exc:
            log.warning("outbox housekeeping failed: %s", exc)

    @property
    def _lock_key(self) -> str:
        return f"gpucloud.relay.{self._schema}"

    async def _publish(self, rows: list[asyncpg.Record]) -> None:
        futures = []
        for row in rows:
            topic = f"{self._prefix}{row['topic']}"
            with span_from_traceparent(
                f"{row['topic']} publish",
                traceparent=row["traceparent"],
                kind=SpanKind.PRODUCER,
                attributes={
                    "messaging.destination.name": topic,
                    "messaging.message.id": str(row["event_id"]),
                },
            ):
                headers = [*kafka_headers(current_traceparent()), ("ce_id", str(row["event_id"]).encode())]
                futures.append(
                    await self._producer.send(
                        topic, value=bytes(row["payload"]), key=row["key"].encode(), headers=headers
                    )
                )
            EVENTS_PRODUCED.labels(self._service, row["topic"]).inc()
        await asyncio.gather(*futures)

    async def _mark_sent(self, conn: asyncpg.Connection[Any], seqs: list[int]) -> None:
        await conn.execute(_MARK, seqs)

    def _on_notify(self, conn: object, pid: int, channel: str, payload: str) -> None:
        if payload == self._schema:
            self._wake.set()

    async def _stand_by(self, stop: asyncio.Event) -> None:
        """While another relay holds the schema: wait for a NOTIFY or the poll interval, then try again."""
        self._wake.clear()
        await self._idle(stop)

    async def _idle(self, stop: asyncio.Event) -> None:
        await wait_for_wake(stop, self._wake, self._poll_interval_s)
