"""The outbox relay: publishes committed outbox rows with acks=all, then marks them sent.

A crash after publishing and before marking republishes the rows on restart; consumers dedupe by
event id, so delivery is at least once and application exactly once. One relay per schema works
at a time, which keeps the per-key order of the outbox: a running relay holds a session advisory lock on
its listening connection (a standby takes over when that connection goes), and a one-off
``publish_batch`` takes the same lock for its transaction.

A broker that lost its log (restarted empty, or replaced by an empty one) has not got the rows marked sent
to it. Each row records the broker it went to (``sent_to``, the cluster id); the relay checks which broker
it talks to before its first batch, after any failed one and every ``verify_every_s``, never per event. On
another broker it recreates the topics and marks unsent again every kept row sent to a different one, so
they are published again, in outbox order, before the rows behind them; consumers' inboxes drop what they
had applied. A broker whose cluster id stays the same shows a new log by the offsets its acks carry going
backwards: the kept rows sent before that batch are published again. What is kept is the retention
(``retention_s``, an hour): a row sent longer before the loss, and not applied by then, is not recovered.

A row the broker refuses for itself (``MessageSizeTooLargeError``: above ``MAX_EVENT_BYTES``) is moved to
``outbox_dead_letters`` with the error, counted in ``gpucloud_outbox_dead_lettered_total`` and logged once;
the other rows of its batch, and the ones behind, are published as usual, the later rows of its key too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import asyncpg
from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.errors import (
    CorruptRecordException,
    InvalidTopicError,
    KafkaError,
    MessageSizeTooLargeError,
    RecordListTooLargeError,
    RecordTooLargeError,
)
from opentelemetry.trace import SpanKind
from prometheus_client import Counter

from libs.common.bus.incarnation import Outage, look
from libs.common.bus.kafka import CLOUDEVENTS_CONTENT_TYPE
from libs.common.db.leadership import Lease, lead
from libs.common.db.pool import QUEUE_READS
from libs.common.observability.metrics import EVENTS_PRODUCED, OUTBOX_BACKLOG
from libs.common.observability.tracing import current_traceparent, kafka_headers, span_from_traceparent
from libs.common.stopping import sleep_or_stop, wait_for_wake

__all__ = ["OUTBOX_DEAD_LETTERED", "REFUSED", "OutboxRelay"]

log = logging.getLogger(__name__)

OUTBOX_DEAD_LETTERED = Counter(
    "gpucloud_outbox_dead_lettered_total",
    "Outbox rows the broker refused, moved to outbox_dead_letters instead of being published.",
    ["service", "topic"],
)
#: Errors that refuse one record for what it is: publishing it again can never succeed.
REFUSED: tuple[type[KafkaError], ...] = (
    MessageSizeTooLargeError,
    RecordTooLargeError,
    RecordListTooLargeError,
    InvalidTopicError,
    CorruptRecordException,
)

_SELECT = (
    "SELECT seq, event_id, topic, key, payload, traceparent FROM outbox "
    "WHERE sent_at IS NULL ORDER BY seq LIMIT $1"
)
_MARK = "UPDATE outbox SET sent_at = now(), sent_to = $2 WHERE seq = ANY($1::bigint[])"
#: Kept rows sent to a broker other than $1: unsent again, so they are published to this one.
_REPLAY_OTHERS = (
    "UPDATE outbox SET sent_at = NULL, sent_to = NULL WHERE sent_at IS NOT NULL AND sent_to <> $1"
)
#: Kept rows sent before row $1 (the first of a batch whose acks showed a new log): unsent again.
_REPLAY_BEFORE = "UPDATE outbox SET sent_at = NULL, sent_to = NULL WHERE sent_at IS NOT NULL AND seq < $1"
_PARK = """
WITH refused AS (SELECT * FROM unnest($1::bigint[], $2::text[]) AS r(seq, error)),
moved AS (
    DELETE FROM outbox o USING refused r WHERE o.seq = r.seq
    RETURNING o.seq, o.event_id, o.topic, o.key, o.payload, o.traceparent, o.created_at, r.error
)
INSERT INTO outbox_dead_letters (seq, event_id, topic, key, payload, traceparent, created_at, error)
SELECT seq, event_id, topic, key, payload, traceparent, created_at, error FROM moved
ON CONFLICT (seq) DO NOTHING
RETURNING topic
"""
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
        recreate_topics: Callable[[], Awaitable[Sequence[str]]] | None = None,
        verify_every_s: float = 2.0,
        session_pool: asyncpg.Pool[Any] | None = None,
    ) -> None:
        self._pool = pool
        # Where the relay's own session comes from (LISTEN, the leader's advisory lock): Postgres
        # itself when ``pool`` is a transaction pooler's.
        self._session_pool = session_pool or pool
        self._producer = producer
        self._service = service
        self._schema = schema
        self._prefix = topic_prefix
        self._batch_size = batch_size
        self._poll_interval_s = poll_interval_s
        self._retention_s = retention_s
        self._housekeeping_interval_s = housekeeping_interval_s
        self._wake = asyncio.Event()
        self._recreate = recreate_topics
        self._verify_every_s = verify_every_s
        self._verify_at = 0.0
        self._broker: str | None = None  # the broker verified for the next batch; None: verify first
        self._last_broker: str | None = None  # the broker this relay last published to
        self._ends: dict[TopicPartition, int] = {}  # per partition, the offset after the last acked record
        self._went_back = False  # the last batch's acks showed a log shorter than the one before
        self._refused: dict[int, str] = {}  # the last batch's refused rows: seq -> error
        self._outage = Outage()
        self.replayed = 0  # rows marked unsent again for a broker that had not got them

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
            self._broker = None
            if not await self._verify(conn):
                raise KafkaError("the broker did not answer")
            return await self._publish_from(conn)

    async def _run_on_connection(self, stop: asyncio.Event) -> None:
        conn = await self._session_pool.acquire()
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
            await self._session_pool.release(conn)

    async def _lead(self, lease: Lease, stop: asyncio.Event) -> None:
        """Publish batches over the lock's own connection, two statements each (no transaction needed:
        marking after publishing is what makes delivery at least once)."""
        conn, housekeeping_at = lease.conn, 0.0
        self._broker = None  # another relay may have led meanwhile: verified before the first batch
        while not stop.is_set() and lease.open:
            now = asyncio.get_running_loop().time()
            if now >= housekeeping_at:
                housekeeping_at = now + self._housekeeping_interval_s
                await self._housekeeping()
            if self._unverified(now) and not await self._verify(conn):
                await sleep_or_stop(stop, self._poll_interval_s)
                continue
            # Cleared before the batch reads the outbox, so a NOTIFY for rows committed while the
            # batch runs is kept and the next wait returns at once (clearing after the batch lost
            # those wake-ups and left such rows waiting for the fallback poll).
            self._wake.clear()
            try:
                sent = await self._publish_from(conn)
            except KafkaError as exc:
                self._cannot_publish(exc)
                sent = 0
                await sleep_or_stop(stop, self._poll_interval_s)
            except (TimeoutError, OSError, asyncpg.PostgresError) as exc:
                log.warning("outbox relay batch failed, retrying: %s", exc)
                sent = 0
                await sleep_or_stop(stop, self._poll_interval_s)
            if sent < self._batch_size:
                await self._idle(stop)

    async def _publish_from(self, conn: asyncpg.Connection[Any]) -> int:
        rows = await conn.fetch(_SELECT, self._batch_size)
        if not rows:
            return 0
        self._refused, self._went_back = {}, False
        try:
            await self._publish(rows)
        finally:
            if self._refused:
                await self._park(conn, self._refused)
        await self._mark_sent(conn, [r["seq"] for r in rows if r["seq"] not in self._refused])
        if (lasted := self._outage.ended()) is not None:
            log.info("outbox relay of %s publishing again after %.1fs", self._schema, lasted)
        if self._went_back:
            await self._replay(conn, _REPLAY_BEFORE, rows[0]["seq"], why="its acks show a new log")
        return len(rows)

    def _unverified(self, now: float) -> bool:
        """Whether the broker must be looked at before the next batch: after a failure, or when due."""
        return self._broker is None or now >= self._verify_at

    async def _verify(self, conn: asyncpg.Connection[Any]) -> bool:
        """Which broker the next batch goes to; on another than the one published to, the kept rows it
        has not got are unsent again. False when the broker does not answer."""
        try:
            async with asyncio.timeout(max(1.0, self._poll_interval_s * 4)):
                cluster = (await look(self._producer.client)).cluster_id
        except (KafkaError, OSError, TimeoutError) as exc:
            self._cannot_publish(exc)
            return False
        self._verify_at = asyncio.get_running_loop().time() + self._verify_every_s
        if cluster != self._broker:
            changed = self._last_broker is not None and self._last_broker != cluster
            await self._replay(conn, _REPLAY_OTHERS, cluster, why=f"it is broker {cluster!r}", force=changed)
            self._broker = self._last_broker = cluster
        return True

    async def _replay(
        self, conn: asyncpg.Connection[Any], sql: str, arg: object, *, why: str, force: bool = False
    ) -> None:
        """Mark the kept rows the broker has not got unsent again, and recreate the topics first."""
        count = int((await conn.execute(sql, arg)).split()[-1])
        if not count and not force:
            return
        created = await self._recreate() if self._recreate is not None else []
        await self._producer.client.force_metadata_update()  # the partitions of the topics as they are now
        self._ends.clear()
        self.replayed += count
        log.warning(
            "outbox relay of %s: the broker has lost its log (%s): recreated %d topic(s), publishing %d kept "
            "event(s) again (consumers drop those they had applied)",
            self._schema,
            why,
            len(created),
            count,
        )

    def _cannot_publish(self, exc: BaseException) -> None:
        self._broker = None  # verified again before the next batch: the broker may be another one
        if self._outage.failed():
            log.warning(
                "outbox relay of %s cannot publish (%r); retrying, quietly until it publishes again",
                self._schema,
                exc,
            )

    async def _park(self, conn: asyncpg.Connection[Any], refused: dict[int, str]) -> None:
        """Move refused rows to the outbox's dead letters, so they never hold up the rows behind them."""
        moved = await conn.fetch(_PARK, list(refused), list(refused.values()))
        for row in moved:
            OUTBOX_DEAD_LETTERED.labels(self._service, row["topic"]).inc()
        for seq, error in refused.items():
            log.error(
                "outbox row %d of %s refused by the broker, moved to outbox_dead_letters: %s",
                seq,
                self._schema,
                error,
            )

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
        """Send the rows and wait for their acks; refused rows are noted in ``_refused``, and any other
        failure is raised once every ack is in (the batch is then published again)."""
        futures: list[tuple[asyncpg.Record, asyncio.Future[Any]]] = []
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
                headers = [
                    CLOUDEVENTS_CONTENT_TYPE,
                    *kafka_headers(current_traceparent()),
                    ("ce_id", str(row["event_id"]).encode()),
                ]
                try:
                    sent = await self._producer.send(
                        topic, value=bytes(row["payload"]), key=row["key"].encode(), headers=headers
                    )
                except REFUSED as exc:  # too large: the producer refuses it before it reaches the broker
                    self._refused[row["seq"]] = f"{type(exc).__name__}: {exc}"
                    continue
                futures.append((row, sent))
            EVENTS_PRODUCED.labels(self._service, row["topic"]).inc()
        acks = await asyncio.gather(*(f for _, f in futures), return_exceptions=True)
        failure: BaseException | None = None
        for (row, _), ack in zip(futures, acks, strict=True):
            if isinstance(ack, REFUSED):
                self._refused[row["seq"]] = f"{type(ack).__name__}: {ack}"
            elif isinstance(ack, BaseException):
                failure = failure or ack
            else:
                self._note_ack(ack.topic_partition, ack.offset)
        if failure is not None:
            raise failure

    def _note_ack(self, tp: TopicPartition, offset: int) -> None:
        """Remember where each partition's log ends; an ack before that end is a new, shorter log."""
        if offset < self._ends.get(tp, 0):
            self._went_back = True
            self._ends.clear()  # the whole log is new: every partition's end is learnt again
        self._ends[tp] = max(self._ends.get(tp, 0), offset + 1)

    async def _mark_sent(self, conn: asyncpg.Connection[Any], seqs: list[int]) -> None:
        if seqs:
            await conn.execute(_MARK, seqs, self._broker)

    def _on_notify(self, conn: object, pid: int, channel: str, payload: str) -> None:
        if payload == self._schema:
            self._wake.set()

    async def _stand_by(self, stop: asyncio.Event) -> None:
        """While another relay holds the schema: wait for a NOTIFY or the poll interval, then try again."""
        self._wake.clear()
        await self._idle(stop)

    async def _idle(self, stop: asyncio.Event) -> None:
        await wait_for_wake(stop, self._wake, self._poll_interval_s)
