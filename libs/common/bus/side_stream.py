"""A side stream: a topic read outside the transactional consumer, for data a replay cannot harm.

Samples are the busiest topic and each only overwrites a latest value or refreshes a short window, so
their readers (telemetry's ingest, alerting's evaluator, recovery's window) write no inbox rows. They
share this loop: poll, hand the poll to the reader, and commit the offsets of what the reader has
handled at the reader's cadence. Nothing is committed after an error: the next owner of the
partitions replays what was fetched and perhaps not applied. A clean stop commits what is handled.

Every ``check_every_s`` (wall time, never per poll) it compares each position with the partition's log end:
a position beyond the end belongs to a log the broker has lost (it restarted empty), so those partitions
are read again from the beginning (a replay of samples is harmless) and that is logged once. Partitions
of a topic deleted meanwhile (a rolling topic's past generation) are neither checked nor committed. A
commit that does not complete in ``commit_timeout_s`` is kept for the next one, logged once per outage.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from aiokafka.errors import KafkaError

from libs.common.bus.generations import generations_of
from libs.common.bus.incarnation import Outage
from libs.common.bus.kafka import create_consumer
from libs.common.settings import BaseServiceSettings

__all__ = ["CommitCadence", "Poll", "SideStream", "side_stream_consumer"]

log = logging.getLogger(__name__)

Poll = Mapping[TopicPartition, Sequence[ConsumerRecord[bytes, bytes]]]


@dataclass(frozen=True, slots=True)
class CommitCadence:
    """How often handled offsets are committed: after every poll (0) or at most every ``every_s``.

    With an interval, handled offsets are also committed once the stream goes quiet, so the last
    records are not left to replay. Committing less often only widens what a crash replays.
    """

    every_s: float = 0.0


def side_stream_consumer(
    settings: BaseServiceSettings,
    *,
    name: str,
    topic: str,
    client_id: str | None = None,
    fetch_max_wait_ms: int | None = None,
) -> AIOKafkaConsumer:
    """The group consumer of a side stream: group ``<service>.<name>``, the logical ``topic``.

    A rolling topic (``ROLLING_TOPICS``) is read by pattern, every generation of it, refreshing its
    metadata ten times a generation: each generation exists a whole generation before it is written.
    ``fetch_max_wait_ms``: the broker's longest hold of a fetch; None takes the settings' value.
    """
    wait_ms = settings.kafka_fetch_max_wait_ms if fetch_max_wait_ms is None else fetch_max_wait_ms
    generations = generations_of(settings, topic)
    return create_consumer(
        bootstrap=settings.kafka_bootstrap_servers,
        group_id=settings.group_id(name),
        topics=[generations.base],
        client_id=client_id or f"{settings.service_name}.{name}",
        fetch_max_wait_ms=wait_ms,
        pattern=generations.pattern() if generations.rolling else None,
        metadata_max_age_ms=min(300000, generations.every_s * 100) if generations.rolling else 300000,
    )


class SideStream:
    """Runs one side-stream reader until stop: ``await SideStream(...).run(stop, handle)``."""

    def __init__(
        self,
        *,
        consumer: AIOKafkaConsumer,
        cadence: CommitCadence,
        poll_timeout_ms: int = 200,
        max_records: int = 500,
        clock: Callable[[], float] = time.monotonic,
        check_every_s: float = 5.0,
        commit_timeout_s: float = 10.0,
    ) -> None:
        self._consumer = consumer
        self._cadence = cadence
        self._timeout_ms = poll_timeout_ms
        self._max_records = max_records
        self._clock = clock
        self._handled: dict[TopicPartition, int] = {}
        self._committed_at = 0.0
        self._check_every_s = check_every_s
        self._commit_timeout_s = commit_timeout_s
        self._check_at = 0.0
        self._stuck = Outage()
        self.incidents = 0  # logs found replaced, and read again from the beginning

    async def run(self, stop: asyncio.Event, handle: Callable[[Poll], Awaitable[None]]) -> None:
        """Poll and ``handle`` until ``stop`` (empty polls too: a reader may have timers to advance)."""
        await self._consumer.start()
        self._check_at = asyncio.get_running_loop().time() + self._check_every_s
        try:
            while not stop.is_set():
                poll = await self._consumer.getmany(
                    timeout_ms=self._timeout_ms, max_records=self._max_records
                )
                await handle(poll)
                for tp, records in poll.items():
                    if records:
                        self._handled[tp] = records[-1].offset + 1
                if self._handled and self._clock() - self._committed_at >= self._cadence.every_s:
                    await self._commit()
                await self._look_after_log()
            # Reached on a clean stop only: what was handled is committed, not left to replay.
            if self._handled:
                try:
                    await self._commit()
                except KafkaError as exc:  # leaving a group mid-rebalance: the next owner replays
                    log.info("final offset commit skipped: %s", exc)
        finally:
            await self._consumer.stop()

    async def _commit(self) -> None:
        # A rebalance may have taken partitions since they were polled: their new owner replays them.
        assigned = self._consumer.assignment()
        handled = {tp: offset for tp, offset in self._handled.items() if tp in assigned and self._exists(tp)}
        self._handled = {}
        if handled:
            try:
                async with asyncio.timeout(self._commit_timeout_s):
                    await self._consumer.commit(handled)
            except TimeoutError:
                # A topic deleted since (a past generation the keeper dropped) fails every commit naming it.
                gone = await self._deleted_topics({tp.topic for tp in handled})
                kept = {tp: offset for tp, offset in handled.items() if tp.topic not in gone}
                self._handled = {**kept, **self._handled}  # committed with the next ones
                self._check_at = 0.0  # a broker that lost the topic answers every commit so: look now
                if self._stuck.failed():
                    log.warning(
                        "side stream: an offset commit did not complete in %.0fs", self._commit_timeout_s
                    )
                return
            if (lasted := self._stuck.ended()) is not None:
                log.info("side stream: offsets commit again after %.0fs", lasted)
        self._committed_at = self._clock()

    def _exists(self, tp: TopicPartition) -> bool:
        """Whether the consumer's metadata still lists the partition's topic (a deleted one it drops)."""
        return self._consumer.partitions_for_topic(tp.topic) is not None

    async def _deleted_topics(self, topics: set[str]) -> set[str]:
        """Those of ``topics`` the broker no longer has (asked afresh; none when it cannot be asked)."""
        try:
            async with asyncio.timeout(self._commit_timeout_s):
                return topics - set(await self._consumer.topics())
        except (KafkaError, TimeoutError):
            return set()

    async def _look_after_log(self) -> None:
        """Every ``check_every_s``: read again from the beginning when a position is beyond its log end."""
        now = asyncio.get_running_loop().time()
        if now < self._check_at:
            return
        self._check_at = now + self._check_every_s
        assigned = [tp for tp in self._consumer.assignment() if self._exists(tp)]
        try:
            ahead = []
            for tp in assigned:
                high = self._consumer.highwater(tp)
                if high is not None and await self._consumer.position(tp) > high:
                    ahead.append(tp)
            if not ahead:
                return
            # Only those: the others' logs are whole (a topic generation younger than the lost one).
            await self._consumer.seek_to_beginning(*ahead)
            self._handled.update(await self._consumer.beginning_offsets(ahead))  # over the old log's
        except KafkaError as exc:  # a rebalance took a partition meanwhile: the next look sees the rest
            log.info("side stream: log check skipped: %s", exc)
            return
        self.incidents += 1
        log.warning(
            "side stream: positions beyond the log end of %s, so the broker lost the log they belong to: "
            "reading them again from the beginning",
            ", ".join(sorted(f"{tp.topic}/{tp.partition}" for tp in ahead)),
        )
