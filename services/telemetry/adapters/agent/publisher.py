"""The agent's producer: messages queued one by one or a slice of node batches at once, then awaited.

The agent has no Postgres, so there is no outbox: it publishes straight to the broker with acks=all
and waits for every tick's sends (see the agent process for why at-least-once still holds).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.partitioner import DefaultPartitioner
from aiokafka.producer.message_accumulator import BatchBuilder

from libs.common.bus.kafka import CLOUDEVENTS_CONTENT_TYPE, create_producer, ensure_topics

__all__ = ["HEADERS", "Publisher"]

#: On every message the agent sends: its values are structured-mode CloudEvents, like the relay's.
HEADERS = [CLOUDEVENTS_CONTENT_TYPE]


class Publisher:
    """One producer, and the sends of the current tick that are not acknowledged yet."""

    def __init__(self) -> None:
        self._pending: list[asyncio.Future[Any]] = []  # send() tasks, each resolving to a delivery future
        self._delivering: list[asyncio.Future[Any]] = []  # delivery futures of whole batches
        self._partitioner = DefaultPartitioner()
        self._partitions: dict[bytes, tuple[list[int], int]] = {}  # key -> (partitions then, its partition)
        self._producer: AIOKafkaProducer | None = None
        self._bootstrap = ""

    def open(self, *, bootstrap: str, client_id: str) -> None:
        """Create the producer (it connects on start)."""
        self._producer = create_producer(bootstrap=bootstrap, client_id=client_id)
        self._bootstrap = bootstrap

    async def create_topics(self, topics: Sequence[str], *, partitions: int) -> None:
        """Create those of ``topics`` that do not exist yet (the admin client, on the producer's broker)."""
        assert self._producer is not None
        await ensure_topics(bootstrap=self._bootstrap, topics=topics, partitions=partitions)

    async def start(self) -> None:
        """Connect the producer."""
        assert self._producer is not None
        await self._producer.start()

    async def stop(self) -> None:
        """Flush and close the producer."""
        assert self._producer is not None
        await self._producer.stop()

    async def publish(self, topic: str, messages: list[tuple[bytes, bytes]]) -> None:
        """Queue (key, value) messages, filling one producer batch per partition instead of a send()
        per message: the same partitions as send() would pick (the producer's partitioner on the key),
        in order, each batch acknowledged as a whole (flush waits for it)."""
        assert self._producer is not None
        producer = self._producer
        partitions = sorted(await producer.partitions_for(topic))
        open_batches: dict[int, BatchBuilder] = {}
        for key, value in messages:
            cached = self._partitions.get(key)
            if cached is None or cached[0] != partitions:
                cached = self._partitions[key] = (partitions, self._partitioner(key, partitions, partitions))
            partition = cached[1]
            batch = open_batches.get(partition)
            if batch is None:
                batch = open_batches[partition] = producer.create_batch()
            appended = batch.append(key=key, value=value, timestamp=None, headers=HEADERS)
            if appended is None:  # full: send it, start another
                self._delivering.append(await producer.send_batch(batch, topic, partition=partition))
                batch = open_batches[partition] = producer.create_batch()
                if batch.append(key=key, value=value, timestamp=None, headers=HEADERS) is None:
                    self.queue(topic, key=key, value=value)  # larger than a batch: send() says why
        for partition, batch in open_batches.items():
            self._delivering.append(await producer.send_batch(batch, topic, partition=partition))

    def queue(self, topic: str, *, key: bytes, value: bytes) -> None:
        """Send one message (flush waits for its acknowledgement)."""
        assert self._producer is not None
        sending = self._producer.send(topic, value=value, key=key, headers=HEADERS)
        self._pending.append(asyncio.ensure_future(sending))

    async def flush(self) -> None:
        """Wait until every message of this tick is acknowledged by all in-sync replicas; raises the first
        failure once every send has settled (none is left unawaited, whatever failed)."""
        pending, self._pending = self._pending, []
        delivering, self._delivering = self._delivering, []
        sent = await asyncio.gather(*pending, return_exceptions=True)
        delivered = [f for f in sent if not isinstance(f, BaseException)]
        acks = await asyncio.gather(*delivered, *delivering, return_exceptions=True)
        failed = [r for r in [*sent, *acks] if isinstance(r, BaseException)]
        if failed:
            raise failed[0]
