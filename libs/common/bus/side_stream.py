"""A side stream: a topic read outside the transactional consumer, for data a replay cannot harm.

Samples are the busiest topic and each only overwrites a latest value or refreshes a short window, so
their readers (telemetry's ingest, alerting's evaluator, recovery's window) write no inbox rows. They
share this loop: poll, hand the poll to the reader, and commit the offsets of what the reader has
handled at the reader's cadence. Nothing is committed after an error: the next owner of the
partitions replays what was fetched and perhaps not applied. A clean stop commits what is handled.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from aiokafka.errors import KafkaError

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

    ``fetch_max_wait_ms``: the broker's longest hold of a fetch; None takes the settings' value.
    """
    wait_ms = settings.kafka_fetch_max_wait_ms if fetch_max_wait_ms is None else fetch_max_wait_ms
    return create_consumer(
        bootstrap=settings.kafka_bootstrap_servers,
        group_id=settings.group_id(name),
        topics=[settings.topic(topic)],
        client_id=client_id or f"{settings.service_name}.{name}",
        fetch_max_wait_ms=wait_ms,
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
    ) -> None:
        self._consumer = consumer
        self._cadence = cadence
        self._timeout_ms = poll_timeout_ms
        self._max_records = max_records
        self._clock = clock
        self._handled: dict[TopicPartition, int] = {}
        self._committed_at = 0.0

    async def run(self, stop: asyncio.Event, handle: Callable[[Poll], Awaitable[None]]) -> None:
        """Poll and ``handle`` until ``stop`` (empty polls too: a reader may have timers to advance)."""
        await self._consumer.start()
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
        handled = {tp: offset for tp, offset in self._handled.items() if tp in assigned}
        self._handled = {}
        if handled:
            await self._consumer.commit(handled)
        self._committed_at = self._clock()
