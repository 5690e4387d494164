"""The fake publisher: nothing is seen before a flush, a failed flush loses its tick, keys pick partitions."""

from __future__ import annotations

import pytest
from aiokafka.errors import KafkaTimeoutError
from aiokafka.partitioner import murmur2

from services.telemetry.adapters.agent.publisher_fake import FakePublisher, Sent

TOPIC = "u.telemetry.samples"


async def _started(fake: FakePublisher | None = None) -> FakePublisher:
    fake = fake or FakePublisher()
    fake.open(bootstrap="kafka-test:9092", client_id="unit")
    await fake.start()
    return fake


async def test_messages_are_in_flight_until_a_flush_delivers_them() -> None:
    fake = await _started()
    await fake.publish(TOPIC, [(b"n1", b"a"), (b"n2", b"b")])
    fake.queue(TOPIC, key=b"n1", value=b"c")

    assert fake.messages(TOPIC) == []
    assert [s.value for s in fake.in_flight] == [b"a", b"b", b"c"]

    await fake.flush()

    assert fake.messages(TOPIC) == [(b"n1", b"a"), (b"n2", b"b"), (b"n1", b"c")]
    assert fake.in_flight == []
    assert fake.flushes == 1


async def test_a_failed_flush_raises_a_broker_timeout_once_and_loses_what_was_in_flight() -> None:
    fake = await _started()
    fake.queue(TOPIC, key=b"n1", value=b"lost")
    fake.fail_next_flush()

    with pytest.raises(KafkaTimeoutError):
        await fake.flush()
    fake.queue(TOPIC, key=b"n1", value=b"next tick")
    await fake.flush()

    assert fake.messages(TOPIC) == [(b"n1", b"next tick")]


async def test_a_flush_can_fail_with_a_chosen_error() -> None:
    fake = await _started()
    fake.fail_next_flush(ConnectionResetError("broker went away"))

    with pytest.raises(ConnectionResetError, match="broker went away"):
        await fake.flush()


async def test_a_key_goes_to_murmur2_of_it_over_the_topics_own_partition_count() -> None:
    fake = await _started(FakePublisher(partitions=3, topic_partitions={"wide": 12}))
    key = b"gpu-node-007"
    fake.queue("wide", key=key, value=b"v")
    fake.queue(TOPIC, key=key, value=b"v")

    assert fake.in_flight == [
        Sent("wide", (murmur2(key) & 0x7FFFFFFF) % 12, key, b"v"),
        Sent(TOPIC, (murmur2(key) & 0x7FFFFFFF) % 3, key, b"v"),
    ]


async def test_what_is_still_in_flight_at_stop_is_dropped_and_nothing_more_can_be_sent() -> None:
    fake = await _started()
    fake.queue(TOPIC, key=b"n1", value=b"unflushed")

    await fake.stop()
    await fake.flush()

    assert fake.messages(TOPIC) == []
    with pytest.raises(RuntimeError, match="stopped"):
        fake.queue(TOPIC, key=b"n1", value=b"late")


async def test_sending_before_start_is_refused() -> None:
    fake = FakePublisher()
    fake.open(bootstrap="kafka-test:9092", client_id="unit")

    with pytest.raises(RuntimeError, match="not started"):
        await fake.publish(TOPIC, [(b"n1", b"a")])


def test_a_topic_has_at_least_one_partition() -> None:
    with pytest.raises(ValueError, match="at least one partition"):
        FakePublisher(topic_partitions={"empty": 0})
