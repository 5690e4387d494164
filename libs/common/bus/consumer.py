"""The consumer runner: at-least-once delivery, exactly-once application.

For each partition batch it tries one transaction for the whole batch (fast path); if any handler
raises, it rolls back and handles the batch event by event with bounded retries and backoff. An
event that still fails goes to ``<topic>.dlq`` with the error attached and is recorded in the inbox
as dead-lettered, so the partition keeps flowing. Offsets are committed only after the
transactions that applied the events have committed; the inbox (consumer, event id) makes a
redelivered event a no-op.

Every few seconds (``check_every_s``, never per event) it looks at the log: a broker that is another one
(its cluster id changed), lacks a topic it reads, or has a log end behind its positions has lost the log
those positions belong to (a broker restarted empty). It then recreates the topics, reads every assigned
partition again from the beginning (the inbox makes the replay harmless), commits those starting offsets
over any committed meanwhile, and logs that once. A commit that does not complete in ``commit_timeout_s``
(aiokafka retries UNKNOWN_TOPIC_OR_PARTITION for ever) makes it look at once. What it applies, commits
and fails is kept in a ``ConsumerHealth`` that readiness reads.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from aiokafka.errors import (
    CommitFailedError,
    IllegalGenerationError,
    KafkaError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from opentelemetry.trace import SpanKind

from libs.common.bus.handlers import Handler, HandlerContext, Handlers
from libs.common.bus.health import ConsumerHealth
from libs.common.bus.incarnation import look
from libs.common.db.uow import UnitOfWork
from libs.common.events import EVENT_TYPES, Envelope, Event, EventDecodeError, decode
from libs.common.events.topics import dlq
from libs.common.observability.metrics import (
    CONSUMER_LAG,
    EVENTS_CONSUMED,
    EVENTS_DEAD_LETTERED,
    EVENTS_FAILED,
)
from libs.common.observability.tracing import span_from_traceparent, traceparent_from_headers

__all__ = ["ConsumerRunner", "RetryPolicy"]


log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Bounded retries with exponential backoff and full jitter."""

    max_attempts: int = 5
    base_s: float = 0.05
    max_s: float = 2.0

    def delay(self, attempt: int, rng: random.Random) -> float:
        """Seconds to wait after the given failed attempt (1-based)."""
        return rng.uniform(0, min(self.max_s, self.base_s * 2 ** (attempt - 1)))


_CLAIM = (
    "INSERT INTO inbox (consumer, event_id, topic, status) VALUES ($1, $2, $3, $4) "
    "ON CONFLICT DO NOTHING RETURNING 1"
)
_CLAIM_MANY = (
    "INSERT INTO inbox (consumer, event_id, topic, status) "
    "SELECT $1, id, t, 'applied' FROM unnest($2::text[], $3::text[]) AS u(id, t) "
    "ON CONFLICT DO NOTHING RETURNING event_id"
)
_DEAD = (
    'INSERT INTO dead_letters (consumer, topic, partition, "offset", event_id, event_type, error, attempts) '
    "VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
)


class _DuplicateInBatch(Exception):
    """The batch holds one event id twice; the event-by-event path handles it."""


class _CommitStuck(Exception):
    """An offset commit did not complete in time: the rest of the poll waits for a look at the log."""


#: Creates the topics that do not exist (``ensure_topics`` bound to a broker and a partition count).
RecreateTopics = Callable[[Sequence[str]], Awaitable[Sequence[str]]]


@dataclass(slots=True)
class _Item:
    record: ConsumerRecord[bytes, bytes]
    logical_topic: str
    envelope: Envelope | None = None
    payload: Event | None = None
    error: str | None = None
    handler: Handler | None = field(default=None)
    failures: int = 0


#: Commit errors that mean the group no longer knows this member's generation, not that the log is bad.
_MEMBERSHIP_LOST = (CommitFailedError, UnknownMemberIdError, IllegalGenerationError, RebalanceInProgressError)


class ConsumerRunner:
    """Runs one consumer group member over a set of logical topics."""

    def __init__(
        self,
        *,
        name: str,
        service: str,
        consumer: AIOKafkaConsumer,
        producer: AIOKafkaProducer,
        uow_factory: Callable[[], UnitOfWork],
        handlers: Handlers[Any, Any],
        topic_prefix: str = "",
        retry: RetryPolicy | None = None,
        rng: random.Random | None = None,
        health: ConsumerHealth | None = None,
        recreate_topics: RecreateTopics | None = None,
        check_every_s: float = 2.0,
        commit_timeout_s: float = 10.0,
    ) -> None:
        self.name = name
        self._service = service
        self._consumer = consumer
        self._producer = producer
        self._uow_factory = uow_factory
        self._deps = handlers.deps
        self._handlers = {cls.event_type(): handler for cls, handler in handlers.table.items()}
        self._prefix = topic_prefix
        self._retry = retry or RetryPolicy()
        self._rng = rng or random.Random()
        self.processed = 0
        self.health = health or ConsumerHealth()
        self._recreate = recreate_topics
        self._check_every_s = check_every_s
        self._commit_timeout_s = commit_timeout_s
        self._check_at = 0.0
        self._cluster: str | None = None  # the broker whose log the positions belong to
        self.incidents = 0  # logs found replaced, and read again from the beginning

    async def run(self, stop: asyncio.Event) -> None:
        """Consume until ``stop`` is set; the consumer must already be started."""
        while not stop.is_set():
            batches = await self._consumer.getmany(timeout_ms=200, max_records=500)
            stuck = False
            for tp, records in batches.items():
                try:
                    # Once a commit is stuck, the poll's other partitions are applied (their records
                    # are fetched already) and committed with a later batch, or replayed harmlessly.
                    await self._process_partition(tp, records, commit=not stuck)
                except _CommitStuck:
                    stuck = True
                    self._check_at = 0.0  # a broker that lost a topic answers every commit so: look now
            await self._look_after_log()

    async def _process_partition(
        self, tp: TopicPartition, records: Sequence[ConsumerRecord[bytes, bytes]], *, commit: bool = True
    ) -> None:
        items = [self._decode(r) for r in records]
        if not await self._apply_batch(items):
            for item in items:
                await self._apply_one(item)
        self.processed += len(records)
        if commit:
            await self._commit({tp: records[-1].offset + 1})
            self.health.applied()

    async def _commit(self, offsets: dict[TopicPartition, int]) -> None:
        try:
            async with asyncio.timeout(self._commit_timeout_s):
                await self._consumer.commit(offsets)
        except TimeoutError:
            self.health.failed(f"an offset commit did not complete within {self._commit_timeout_s:.0f}s")
            raise _CommitStuck from None
        except _MEMBERSHIP_LOST as exc:
            # The group forgot this member (a broker restart, a rebalance): the next poll rejoins, and
            # what was applied but not committed is fetched again and deduplicated by the inbox.
            self.health.failed(f"offset commit refused, rejoining the group: {type(exc).__name__}")
            raise _CommitStuck from None
        except KafkaError as exc:
            self.health.failed(f"offset commit failed: {type(exc).__name__}: {exc}")
            raise

    def _decode(self, record: ConsumerRecord[bytes, bytes]) -> _Item:
        logical = record.topic.removeprefix(self._prefix)
        item = _Item(record=record, logical_topic=logical)
        try:
            item.envelope, item.payload = decode(record.value or b"", EVENT_TYPES)
            item.handler = self._handlers.get(item.envelope.type)
        except EventDecodeError as exc:
            item.error = str(exc)
        return item

    async def _apply_batch(self, items: list[_Item]) -> bool:
        """Apply every decodable, handled event in one transaction; False if any raised."""
        undecodable = any(i.envelope is None for i in items)
        todo = [i for i in items if i.handler is not None]
        if not todo or undecodable:
            return not todo and not undecodable
        try:
            async with self._uow_factory() as uow:
                claimed = await self._claim_many(todo, uow)
                results = [item.envelope.id in claimed for item in todo]  # type: ignore[union-attr]
                for item, fresh in zip(todo, results, strict=True):
                    if fresh:
                        await self._handle(item, uow)
                await uow.commit()
        except Exception as exc:
            log.info("batch of %d failed (%s); retrying event by event", len(todo), exc)
            return False
        for item, applied in zip(todo, results, strict=True):
            EVENTS_CONSUMED.labels(
                self._service, item.logical_topic, "applied" if applied else "duplicate"
            ).inc()
        return True

    async def _apply_one(self, item: _Item) -> None:
        if item.envelope is None:
            await self._dead_letter(item, item.error or "undecodable", attempts=0)
            return
        if item.handler is None:
            EVENTS_CONSUMED.labels(self._service, item.logical_topic, "ignored").inc()
            return
        error = item.error or ""
        for attempt in range(item.failures + 1, self._retry.max_attempts + 1):
            try:
                async with self._uow_factory() as uow:
                    applied = await self._claim_and_handle(item, uow)
                    await uow.commit()
                EVENTS_CONSUMED.labels(
                    self._service, item.logical_topic, "applied" if applied else "duplicate"
                ).inc()
                return
            except Exception:
                error = item.error or ""
                EVENTS_FAILED.labels(
                    self._service, item.logical_topic, item.envelope.type if item.envelope else ""
                ).inc()
                log.warning("handler failed (attempt %d/%d): %s", attempt, self._retry.max_attempts, error)
                if attempt < self._retry.max_attempts:
                    await asyncio.sleep(self._retry.delay(attempt, self._rng))
        await self._dead_letter(item, error, attempts=max(item.failures, self._retry.max_attempts))

    async def _claim_many(self, items: list[_Item], uow: UnitOfWork) -> set[str]:
        """Record every event id of the batch in the inbox at once; returns the ids not seen before."""
        ids = [item.envelope.id for item in items if item.envelope is not None]
        # A batch can carry the same event twice (a republished duplicate): only its first copy is fresh.
        if len(set(ids)) != len(ids):
            raise _DuplicateInBatch
        rows = await uow.conn.fetch(_CLAIM_MANY, self.name, ids, [item.logical_topic for item in items])
        return {row["event_id"] for row in rows}

    async def _claim_and_handle(self, item: _Item, uow: UnitOfWork) -> bool:
        assert item.envelope is not None
        claimed = await uow.conn.fetchval(_CLAIM, self.name, item.envelope.id, item.logical_topic, "applied")
        if not claimed:
            return False
        await self._handle(item, uow)
        return True

    async def _handle(self, item: _Item, uow: UnitOfWork) -> None:
        assert item.envelope is not None
        assert item.handler is not None
        traceparent = item.envelope.traceparent or traceparent_from_headers(item.record.headers)
        with (
            self._count_failure(item),
            span_from_traceparent(
                f"{item.logical_topic} process",
                traceparent=traceparent,
                kind=SpanKind.CONSUMER,
                attributes={
                    "messaging.message.id": item.envelope.id,
                    "gpucloud.event_type": item.envelope.type,
                },
            ),
        ):
            await item.handler(item.payload, HandlerContext(envelope=item.envelope, uow=uow, deps=self._deps))

    @contextmanager
    def _count_failure(self, item: _Item) -> Iterator[None]:
        """Every failed handler call counts towards the retry bound, the batch attempt included."""
        try:
            yield
        except Exception as exc:
            item.failures += 1
            item.error = f"{type(exc).__name__}: {exc}"
            raise

    async def _dead_letter(self, item: _Item, error: str, *, attempts: int) -> None:
        record = item.record
        headers = [
            *list(record.headers or ()),
            ("dlq.error", error[:2000].encode()),
            ("dlq.consumer", self.name.encode()),
            ("dlq.attempts", str(attempts).encode()),
            ("dlq.source", f"{record.topic}/{record.partition}/{record.offset}".encode()),
        ]
        await self._producer.send_and_wait(
            dlq(record.topic), value=record.value, key=record.key, headers=headers
        )
        async with self._uow_factory() as uow:
            if item.envelope is not None:
                await uow.conn.execute(
                    _CLAIM, self.name, item.envelope.id, item.logical_topic, "dead_lettered"
                )
            await uow.conn.execute(
                _DEAD,
                self.name,
                item.logical_topic,
                record.partition,
                record.offset,
                item.envelope.id if item.envelope else None,
                item.envelope.type if item.envelope else None,
                error,
                attempts,
            )
            await uow.commit()
        EVENTS_DEAD_LETTERED.labels(self._service, item.logical_topic).inc()
        log.error("event sent to %s after %d attempt(s): %s", dlq(record.topic), attempts, error)

    async def _look_after_log(self) -> None:
        """Every ``check_every_s``: report the lag, and start over on a log that is not the one read."""
        now = asyncio.get_running_loop().time()
        if now < self._check_at:
            return
        self._check_at = now + self._check_every_s
        try:
            async with asyncio.timeout(max(self._commit_timeout_s, 1.0)):
                reason, cluster = await self._log_replaced()
                if reason is not None:
                    await self._start_over(reason)
                self._cluster = cluster  # only once started over: a failed attempt is tried again
        except (KafkaError, OSError, TimeoutError) as exc:
            self.health.failed(f"cannot look at the log: {type(exc).__name__}: {exc}")
            return
        self.health.checked()

    async def _log_replaced(self) -> tuple[str | None, str]:
        """Why the log the broker has is not the one these positions belong to (None when it is), and the
        broker's cluster id."""
        ahead = []
        for tp in self._consumer.assignment():
            high = self._consumer.highwater(tp)
            if high is None:
                continue
            position = await self._consumer.position(tp)
            CONSUMER_LAG.labels(self._service, tp.topic.removeprefix(self._prefix), str(tp.partition)).set(
                max(0, high - position)
            )
            if position > high:
                ahead.append(f"{tp.topic}/{tp.partition} at {position} of {high}")
        view = await look(self._producer.client, sorted(self._consumer.subscription()))
        known, reason = self._cluster, None
        if known is not None and known != view.cluster_id:
            reason = f"the broker is another one (cluster {known!r}, now {view.cluster_id!r})"
        elif view.missing:
            reason = f"the broker has no topic {', '.join(sorted(view.missing))}"
        elif ahead:
            reason = f"positions beyond the log end ({', '.join(sorted(ahead))})"
        return reason, view.cluster_id

    async def _start_over(self, reason: str) -> None:
        """Recreate the topics, read every assigned partition from its beginning, commit those offsets."""
        topics = sorted(self._consumer.subscription())
        created: Sequence[str] = []
        if self._recreate is not None:
            created = await self._recreate([*topics, *(dlq(t) for t in topics)])
        assigned = list(self._consumer.assignment())
        if assigned:
            await self._consumer.seek_to_beginning(*assigned)
            starts = await self._consumer.beginning_offsets(assigned)
            # Offsets committed before this was noticed belong to the old log: a new owner would skip.
            await self._consumer.commit(dict(starts))
        self.incidents += 1
        log.warning(
            "consumer %s: %s, so the log is not the one its offsets belong to: recreated %d topic(s), "
            "reading %d partition(s) again from the beginning (the inbox skips what was applied)",
            self.name,
            reason,
            len(created),
            len(assigned),
        )
