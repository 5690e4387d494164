"""Kafka clients configured the way the bus relies on them, and topic creation."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaConnectionError, KafkaError

from libs.common.bus.gzip_level import use_gzip_level
from libs.common.bus.quiet import quiet_client_logs
from libs.common.events.topics import ALL_TOPICS, dlq

__all__ = [
    "CLOUDEVENTS_CONTENT_TYPE",
    "MAX_EVENT_BYTES",
    "MAX_RECORD_BYTES",
    "all_physical_topics",
    "create_consumer",
    "create_producer",
    "ensure_topics",
    "group_lag",
    "log_end_offsets",
    "wait_for_broker",
]

log = logging.getLogger(__name__)

#: The CloudEvents Kafka protocol binding, structured content mode: every message's value is a whole
#: CloudEvent in JSON (libs/common/events/envelope.py), and this header says so, so a client that knows the
#: binding (a CloudEvents SDK, a connector) reads our topics without being told.
CLOUDEVENTS_CONTENT_TYPE = ("content-type", b"application/cloudevents+json; charset=UTF-8")

#: The largest event a service's producer (the outbox relay's) sends: Apache Kafka's default
#: ``message.max.bytes`` (1 MiB), so that what passes on the embedded broker (which takes 8 MiB) passes on
#: Kafka too. A larger event is refused with ``MessageSizeTooLargeError``, and the relay parks it (relay.py).
MAX_EVENT_BYTES = 1024 * 1024
#: The largest record other producers send (the node agent's sample batches, tools and tests).
MAX_RECORD_BYTES = 8 * 1024 * 1024


def create_producer(
    *, bootstrap: str, client_id: str, linger_ms: int = 2, max_record_bytes: int = MAX_RECORD_BYTES
) -> AIOKafkaProducer:
    """A producer that waits for every in-sync replica (acks=all).

    The idempotent producer is not used: the embedded broker rejects InitProducerId, and the
    inbox makes duplicates harmless anyway. ``linger_ms``: how long a batch waits for more records; 0
    suits a sender that hands over whole batches at once (the outbox relay), which lingering only delays.
    ``max_record_bytes``: a larger record is refused before it is sent (``MessageSizeTooLargeError``).
    """
    quiet_client_logs()
    use_gzip_level()  # aiokafka's fixed level 9 costs 4-5x the CPU for a fifth smaller batches
    return AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        client_id=client_id,
        acks="all",
        enable_idempotence=False,
        compression_type="gzip",
        linger_ms=linger_ms,
        max_batch_size=1024 * 1024,
        max_request_size=max_record_bytes,
        request_timeout_ms=15000,
    )


#: How long the broker may hold a fetch by default (see ``create_consumer``).
DEFAULT_FETCH_MAX_WAIT_MS = 25


def create_consumer(
    *,
    bootstrap: str,
    group_id: str,
    topics: Iterable[str],
    client_id: str,
    fetch_max_wait_ms: int = DEFAULT_FETCH_MAX_WAIT_MS,
    pattern: str | None = None,
    metadata_max_age_ms: int = 300000,
) -> AIOKafkaConsumer:
    """A group consumer that never auto-commits: offsets move only after the handler's transaction.

    ``fetch_max_wait_ms`` is short by default because the embedded broker holds every fetch for the
    whole wait even when data arrives (Apache Kafka answers as soon as data is there); with a real
    Kafka, raise it (KAFKA_FETCH_MAX_WAIT_MS=500) to spare idle polling. ``pattern``: subscribe to
    every topic matching this regular expression instead of ``topics`` (a rolling topic's
    generations), noticing new and deleted ones at each metadata refresh (``metadata_max_age_ms``).
    """
    quiet_client_logs()
    consumer = AIOKafkaConsumer(
        *([] if pattern else topics),
        bootstrap_servers=bootstrap,
        group_id=group_id,
        client_id=client_id,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_poll_records=500,
        fetch_max_wait_ms=fetch_max_wait_ms,
        session_timeout_ms=10000,
        heartbeat_interval_ms=1000,
        max_poll_interval_ms=300000,
        metadata_max_age_ms=metadata_max_age_ms,
    )
    if pattern:
        consumer.subscribe(pattern=pattern)
    return consumer


def all_physical_topics(prefix: str) -> list[str]:
    """Every topic of the registry and its dead-letter topic, with the prefix applied."""
    return [f"{prefix}{name}" for topic in ALL_TOPICS for name in (topic, dlq(topic))]


async def wait_for_broker(*, bootstrap: str, timeout_s: float = 30.0) -> None:
    """Return once the broker answers metadata requests; raise after the timeout."""
    quiet_client_logs()
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=3000)
        try:
            await admin.start()
            await admin.list_topics()
            return
        except (KafkaConnectionError, KafkaError, OSError) as exc:
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"Kafka at {bootstrap} did not answer within {timeout_s}s: {exc}") from exc
            await asyncio.sleep(0.3)
        finally:
            await admin.close()


async def ensure_topics(*, bootstrap: str, topics: Iterable[str], partitions: int) -> list[str]:
    """Create the topics that do not exist yet; returns those created."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        missing = sorted(set(topics) - existing)
        if missing:
            new = [NewTopic(name=t, num_partitions=partitions, replication_factor=1) for t in missing]
            try:
                await admin.create_topics(new)
            except KafkaError as exc:  # another replica may have created them a moment ago
                log.info("create_topics raced with another creator: %s", exc)
        return missing
    finally:
        await admin.close()


async def log_end_offsets(
    *, bootstrap: str, partitions: Sequence[TopicPartition], timeout_s: float = 10.0
) -> dict[TopicPartition, int]:
    """Each partition's log end offset (the next offset to be written), as a fetch reports it.

    ``AIOKafkaConsumer.end_offsets`` (ListOffsets) is right on Apache Kafka, but the embedded broker
    (Tansu 0.6) answers an offset inside the partition's last batch: short of the end whenever that
    batch holds several records. A fetch from there returns the true high watermark, so this reads
    one from a consumer of its own (no group, nothing committed) and takes the larger of the two.
    """
    consumer = _probe(bootstrap, group=None)
    await consumer.start()
    try:
        return await _read_ends(consumer, partitions, timeout_s=timeout_s)
    finally:
        await consumer.stop()


async def group_lag(*, bootstrap: str, group: str, partitions: Sequence[TopicPartition]) -> int:
    """Records of these partitions that the consumer group has not committed yet."""
    consumer = _probe(bootstrap, group=group)  # assigned, never subscribed: it does not join the group
    await consumer.start()
    try:
        ends = await _read_ends(consumer, partitions, timeout_s=10.0)
        committed = {tp: (await consumer.committed(tp)) or 0 for tp in partitions}
        return sum(max(0, ends[tp] - committed[tp]) for tp in partitions)
    finally:
        await consumer.stop()


def _probe(bootstrap: str, *, group: str | None) -> AIOKafkaConsumer:
    """A consumer that only looks: partitions are assigned to it, and it commits nothing."""
    return AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False, fetch_max_wait_ms=10
    )


async def _read_ends(
    consumer: AIOKafkaConsumer, partitions: Sequence[TopicPartition], *, timeout_s: float
) -> dict[TopicPartition, int]:
    """See log_end_offsets: the listed end, or the high watermark of a fetch from there when larger."""
    listed = await consumer.end_offsets(list(partitions))
    consumer.assign(list(partitions))
    for tp in partitions:
        consumer.seek(tp, listed[tp])
    deadline = asyncio.get_running_loop().time() + timeout_s
    while any(consumer.highwater(tp) is None for tp in partitions):
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(f"no fetch answered for {list(partitions)} within {timeout_s}s")
        await consumer.getmany(*partitions, timeout_ms=100, max_records=1)
    return {tp: max(listed[tp], consumer.highwater(tp) or 0) for tp in partitions}
