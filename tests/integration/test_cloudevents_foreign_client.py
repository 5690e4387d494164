"""A client we did not write reads our topics: librdkafka (confluent-kafka) decodes the relay's CloudEvents.

The CloudEvents Kafka binding, structured mode: the value is the whole event as JSON and the
`content-type` header says so. Read here with confluent-kafka, as an operator's own consumer would, from
an event the outbox relay published out of a committed unit of work.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from libs.common.bus import OutboxRelay, create_producer
from libs.common.db import PostgresUnitOfWork, create_pool
from libs.common.events import topics
from libs.common.events.platform import TenantCreatedV1
from tests.integration.bus_fixtures import create_topics, prepare_schema
from tests.integration.support import Isolation

pytestmark = pytest.mark.integration


def _read_one(bootstrap: str, topic: str, *, timeout_s: float) -> Any:
    """The first message of the topic's partitions, read as any librdkafka consumer would."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "foreign", "enable.auto.commit": False})
    try:
        partitions = consumer.list_topics(topic, timeout=timeout_s).topics[topic].partitions
        # Assigned, not subscribed: librdkafka's first group join on the embedded broker waits ~20 s (README).
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None and error.code() != KafkaError._PARTITION_EOF:
                raise AssertionError(f"confluent-kafka could not read {topic}: {error}")
            if error is None:
                return message
        raise AssertionError(f"nothing on {topic} within {timeout_s} s")
    finally:
        consumer.close()


async def test_confluent_kafka_reads_a_relayed_event_as_a_structured_cloudevent(isolation: Isolation) -> None:
    schema = isolation.schema("foreign")
    await prepare_schema(isolation, schema)
    await create_topics(isolation, topics.PLATFORM)
    pool = await create_pool(dsn=isolation.infra.database_url, schema=schema, max_size=3)
    producer = create_producer(bootstrap=isolation.infra.kafka, client_id="foreign")
    await producer.start()
    relay = OutboxRelay(
        pool=pool,
        producer=producer,
        service="foreign-test",
        schema=schema,
        topic_prefix=isolation.topic_prefix,
    )
    stop = asyncio.Event()
    task = asyncio.create_task(relay.run(stop))
    try:
        async with PostgresUnitOfWork(pool=pool, source="inventory") as uow:
            event_id = await uow.emit(TenantCreatedV1(tenant_id="acme", name="Acme ML"))
            await uow.commit()
        topic = f"{isolation.topic_prefix}{topics.PLATFORM}"
        message = await asyncio.to_thread(_read_one, isolation.infra.kafka, topic, timeout_s=30)
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=15)
        await producer.stop()
        await pool.close()
    headers = dict(message.headers() or [])
    assert headers["content-type"] == b"application/cloudevents+json; charset=UTF-8"
    event = json.loads(message.value())
    assert event["specversion"] == "1.0"
    assert event["id"] == event_id
    assert event["type"] == TenantCreatedV1.event_type()
    assert event["source"] == "/gpucloud/inventory"
    assert message.key() == event["subject"].encode()
    assert event["data"]["tenant_id"] == "acme"
    assert event["data"]["name"] == "Acme ML"
