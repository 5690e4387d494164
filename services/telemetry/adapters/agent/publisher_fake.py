"""An in-memory twin of the agent's Publisher for unit tests: messages by topic and partition, seen at flush.

A key lands on the partition the real producer picks for it (aiokafka's DefaultPartitioner: murmur2 of the
key over the topic's partitions), so a test can ask where a node's batches go. Nothing is visible before
`flush`: what was published or queued since the last flush is in flight. `fail_next_flush()` makes the next
flush raise what the real one raises when the broker does not acknowledge in time, and drops what was in
flight (the real producer may have delivered part of it, or none). Messages still in flight at `stop` are
dropped too: the agent flushes every tick, and the real producer may lose what was queued but not flushed.
tests/integration/telemetry/test_publisher_contract.py holds it to the real Publisher.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from aiokafka.errors import KafkaTimeoutError
from aiokafka.partitioner import DefaultPartitioner

__all__ = ["FakePublisher", "Sent"]


@dataclass(frozen=True, slots=True)
class Sent:
    """One message, and the partition of its topic it went to."""

    topic: str
    partition: int
    key: bytes
    value: bytes


class FakePublisher:
    """Every topic has `partitions` partitions unless `topic_partitions` names its own count."""

    def __init__(self, *, partitions: int = 3, topic_partitions: Mapping[str, int] | None = None) -> None:
        if partitions < 1 or any(n < 1 for n in (topic_partitions or {}).values()):
            raise ValueError("a topic has at least one partition")
        self._partitions = partitions
        self._topic_partitions = dict(topic_partitions or {})
        self._partitioner = DefaultPartitioner()
        self._failure: BaseException | None = None
        self._delivered: list[Sent] = []
        self.in_flight: list[Sent] = []  # published or queued, not flushed yet
        self.opened: tuple[str, str] | None = None  # (bootstrap, client_id)
        self.started = False
        self.stopped = False
        self.flushes = 0  # flushes that succeeded
        self.created: list[str] = []  # topics created through create_topics, in order

    def open(self, *, bootstrap: str, client_id: str) -> None:
        """Remember where the producer would connect."""
        self.opened = (bootstrap, client_id)

    async def start(self) -> None:
        """Connect (the real one needs `open` first)."""
        if self.opened is None:
            raise RuntimeError("start before open")
        self.started = True

    async def stop(self) -> None:
        """Close; what is still in flight is dropped."""
        self.stopped = True
        self.in_flight.clear()

    async def create_topics(self, topics: Sequence[str], *, partitions: int) -> None:
        """Create the topics not created yet, each with ``partitions`` partitions (unless named before)."""
        if self.opened is None:
            raise RuntimeError("create_topics before open")
        for topic in topics:
            if topic not in self.created:
                self.created.append(topic)
                self._topic_partitions.setdefault(topic, partitions)

    async def publish(self, topic: str, messages: list[tuple[bytes, bytes]]) -> None:
        """Queue (key, value) messages, each to its key's partition, in order."""
        for key, value in messages:
            self.queue(topic, key=key, value=value)

    def queue(self, topic: str, *, key: bytes, value: bytes) -> None:
        """Queue one message to its key's partition."""
        if not self.started or self.stopped:
            raise RuntimeError(f"the publisher is {'stopped' if self.stopped else 'not started'}")
        self.in_flight.append(Sent(topic, self.partition_for(topic, key), key, value))

    async def flush(self) -> None:
        """Deliver what is in flight; raises the injected failure instead, once, dropping it."""
        in_flight, self.in_flight = self.in_flight, []
        failure, self._failure = self._failure, None
        if failure is not None:
            raise failure
        self._delivered.extend(in_flight)
        self.flushes += 1

    def fail_next_flush(self, error: BaseException | None = None) -> None:
        """Make the next flush raise `error` (by default a KafkaTimeoutError, as when no ack came in time)."""
        self._failure = error if error is not None else KafkaTimeoutError()

    def partition_for(self, topic: str, key: bytes) -> int:
        """The partition of `topic` that messages with `key` go to."""
        partitions = list(range(self._topic_partitions.get(topic, self._partitions)))
        return int(self._partitioner(key, partitions, partitions))

    def delivered(self, topic: str) -> dict[int, list[tuple[bytes, bytes]]]:
        """The flushed (key, value) messages of `topic` by partition, each partition in order."""
        found: dict[int, list[tuple[bytes, bytes]]] = {}
        for sent in self._delivered:
            if sent.topic == topic:
                found.setdefault(sent.partition, []).append((sent.key, sent.value))
        return found

    def topics(self) -> list[str]:
        """The topics holding flushed messages, in the order of their first."""
        return list(dict.fromkeys(s.topic for s in self._delivered))

    def messages(self, topic: str) -> list[tuple[bytes, bytes]]:
        """The flushed (key, value) messages of `topic`, in the order they were flushed."""
        return [(s.key, s.value) for s in self._delivered if s.topic == topic]
