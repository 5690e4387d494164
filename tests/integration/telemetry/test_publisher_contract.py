"""One contract for the agent's producer: FakePublisher and the real Publisher on the test broker.

What the agent relies on: a key's messages stay in order on one partition (the one the producer's
partitioner picks for it), publish() and queue() are both delivered once flushed, a message larger than a
producer batch still goes out, and topics are kept apart. The real one is read back from the broker
(every partition from the beginning); the fake is read from what it was flushed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.partitioner import DefaultPartitioner

from libs.common.bus.kafka import ensure_topics
from services.telemetry.adapters.agent.publisher import Publisher as KafkaPublisher
from services.telemetry.adapters.agent.publisher_fake import FakePublisher
from services.telemetry.service.agent.ports import Publisher
from tests.integration.support import Isolation, eventually

pytestmark = pytest.mark.integration

PARTITIONS = 3
BATCH_BYTES = 1024 * 1024  # the producer's max_batch_size (libs/common/bus/kafka.py)
Delivered = dict[int, list[tuple[bytes, bytes]]]  # partition -> (key, value) in partition order


@dataclass(frozen=True, slots=True)
class Subject:
    publisher: Publisher
    topic: Callable[[str], str]  # the physical name of a topic of this test
    read: Callable[[str, int], Awaitable[Delivered]]  # a topic once it holds this many messages


async def _read_back(bootstrap: str, topic: str, count: int) -> Delivered:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=16 * BATCH_BYTES,
        fetch_max_bytes=16 * BATCH_BYTES,
    )
    await consumer.start()
    found: Delivered = {}
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        await consumer.seek_to_beginning()

        async def complete() -> bool:
            for tp, records in (await consumer.getmany(timeout_ms=200)).items():
                found.setdefault(tp.partition, []).extend((r.key, r.value) for r in records)
            return sum(len(m) for m in found.values()) >= count

        await eventually(complete, timeout=30, what=f"{count} messages on {topic}")
    finally:
        await consumer.stop()
    return found


@pytest.fixture(params=["fake", "kafka"])
async def subject(request: pytest.FixtureRequest, isolation: Isolation) -> AsyncIterator[Subject]:
    def topic(name: str) -> str:
        return f"{isolation.topic_prefix}contract.{name}"

    bootstrap = isolation.infra.kafka
    if request.param == "fake":
        fake = FakePublisher(partitions=PARTITIONS)

        async def read_fake(name: str, count: int) -> Delivered:
            return fake.delivered(name)

        publisher: Publisher = fake
        read = read_fake
    else:
        names = [topic(n) for n in ("samples", "faults")]
        await ensure_topics(bootstrap=bootstrap, topics=names, partitions=PARTITIONS)
        publisher = KafkaPublisher()

        async def read_kafka(name: str, count: int) -> Delivered:
            return await _read_back(bootstrap, name, count)

        read = read_kafka
    publisher.open(bootstrap=bootstrap, client_id="publisher-contract")
    await publisher.start()
    try:
        yield Subject(publisher=publisher, topic=topic, read=read)
    finally:
        await publisher.stop()


def _partition_of(key: bytes) -> int:
    every = list(range(PARTITIONS))
    return int(DefaultPartitioner()(key, every, every))


def _by_key(delivered: Delivered) -> dict[bytes, list[tuple[int, bytes]]]:
    """key -> (partition, value) of its messages, in the order its partition holds them."""
    found: dict[bytes, list[tuple[int, bytes]]] = {}
    for partition, messages in sorted(delivered.items()):
        for key, value in messages:
            found.setdefault(key, []).append((partition, value))
    return found


NODES = [f"gpu-node-{n:03d}".encode() for n in range(12)]


async def test_a_keys_messages_keep_their_order_on_the_partition_the_partitioner_picks(
    subject: Subject,
) -> None:
    topic = subject.topic("samples")
    for tick in range(3):  # three ticks, each two slices of node batches, then a flush
        for part in (NODES[:7], NODES[7:]):
            await subject.publisher.publish(topic, [(node, b"tick-%d" % tick) for node in part])
        await subject.publisher.flush()

    by_key = _by_key(await subject.read(topic, 3 * len(NODES)))

    assert sorted(by_key) == sorted(NODES)
    for node in NODES:
        assert by_key[node] == [(_partition_of(node), b"tick-%d" % tick) for tick in range(3)]
    assert len({_partition_of(node) for node in NODES}) == PARTITIONS  # the keys spread over all three


async def test_queued_and_published_messages_are_all_delivered_after_one_flush(subject: Subject) -> None:
    topic = subject.topic("samples")
    for n in range(4):
        for node in NODES[:4]:
            subject.publisher.queue(topic, key=node, value=b"queued-%d" % n)
    await subject.publisher.publish(topic, [(node, b"published") for node in NODES])
    await subject.publisher.flush()

    by_key = _by_key(await subject.read(topic, 16 + len(NODES)))

    for node in NODES[:4]:
        values = [value for _, value in by_key[node]]
        assert sorted(values) == sorted([b"queued-0", b"queued-1", b"queued-2", b"queued-3", b"published"])
        assert [v for v in values if v.startswith(b"queued")] == [b"queued-%d" % n for n in range(4)]
        assert {partition for partition, _ in by_key[node]} == {_partition_of(node)}
    for node in NODES[4:]:
        assert by_key[node] == [(_partition_of(node), b"published")]


async def test_a_message_larger_than_a_producer_batch_is_still_delivered_in_its_place(
    subject: Subject,
) -> None:
    topic = subject.topic("samples")
    big = b"x" * (BATCH_BYTES + BATCH_BYTES // 2)  # compresses small, but a batch counts it uncompressed
    node = NODES[0]
    await subject.publisher.publish(topic, [(node, b"before"), (node, big), (node, b"after")])
    subject.publisher.queue(topic, key=NODES[1], value=big)
    await subject.publisher.flush()

    by_key = _by_key(await subject.read(topic, 4))

    assert [value for _, value in by_key[node]] == [b"before", big, b"after"]
    assert by_key[NODES[1]] == [(_partition_of(NODES[1]), big)]


async def test_messages_of_two_topics_are_kept_apart(subject: Subject) -> None:
    samples, faults = subject.topic("samples"), subject.topic("faults")
    await subject.publisher.publish(samples, [(node, b"sample") for node in NODES[:3]])
    subject.publisher.queue(faults, key=NODES[0], value=b"fault")
    await subject.publisher.flush()

    assert _by_key(await subject.read(faults, 1)) == {NODES[0]: [(_partition_of(NODES[0]), b"fault")]}
    by_key = _by_key(await subject.read(samples, 3))
    assert by_key == {node: [(_partition_of(node), b"sample")] for node in NODES[:3]}


async def test_a_topic_created_through_the_publisher_takes_messages_on_its_partitions(
    subject: Subject,
) -> None:
    topic = subject.topic("samples.1800000000")  # a generation, as the agent creates it
    await subject.publisher.create_topics([topic], partitions=PARTITIONS)
    await subject.publisher.create_topics([topic], partitions=PARTITIONS)  # again: nothing changes
    await subject.publisher.publish(topic, [(node, b"first") for node in NODES])
    await subject.publisher.flush()

    by_key = _by_key(await subject.read(topic, len(NODES)))

    assert by_key == {node: [(_partition_of(node), b"first")] for node in NODES}


async def test_every_message_of_the_real_publisher_says_it_is_a_structured_cloudevent(
    isolation: Isolation,
) -> None:
    """The CloudEvents Kafka binding: a client we did not write knows the value's format from the header."""
    bootstrap = isolation.infra.kafka
    name = f"{isolation.topic_prefix}contract.headers"
    await ensure_topics(bootstrap=bootstrap, topics=[name], partitions=PARTITIONS)
    publisher = KafkaPublisher()
    publisher.open(bootstrap=bootstrap, client_id="publisher-headers")
    await publisher.start()
    try:
        await publisher.publish(name, [(b"node-a", b"{}"), (b"node-b", b"{}")])  # batches
        publisher.queue(name, key=b"node-c", value=b"{}")  # one send
        await publisher.flush()
    finally:
        await publisher.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    headers: list[dict[str, bytes]] = []
    try:
        consumer.assign([TopicPartition(name, p) for p in range(PARTITIONS)])
        await consumer.seek_to_beginning()

        async def all_read() -> bool:
            for records in (await consumer.getmany(timeout_ms=200)).values():
                headers.extend(dict(r.headers) for r in records)
            return len(headers) >= 3

        await eventually(all_read, timeout=30, what="3 messages")
    finally:
        await consumer.stop()
    assert [h.get("content-type") for h in headers] == [b"application/cloudevents+json; charset=UTF-8"] * 3
