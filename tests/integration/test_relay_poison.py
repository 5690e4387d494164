"""An outbox event the broker refuses never blocks the events behind it: it is parked, counted and logged."""

from __future__ import annotations

import asyncio
import logging

import pytest
from prometheus_client import REGISTRY

from libs.common.bus import OutboxRelay, create_producer
from libs.common.bus.kafka import MAX_EVENT_BYTES
from libs.common.db import PostgresUnitOfWork, create_pool
from libs.common.events import topics
from libs.common.events.platform import TenantCreatedV1
from tests.integration.bus_fixtures import create_topics, prepare_schema
from tests.integration.support import Isolation, TopicReader, eventually

SERVICE = "poison-test"


def _parked_count() -> float:
    value = REGISTRY.get_sample_value(
        "gpucloud_outbox_dead_lettered_total", {"service": SERVICE, "topic": topics.PLATFORM}
    )
    return value or 0.0


async def test_a_2_mb_event_between_two_normal_ones_is_parked_and_the_normal_ones_arrive_in_order(
    isolation: Isolation, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="libs.common.bus.relay")
    schema = isolation.schema("poison")
    await prepare_schema(isolation, schema)
    await create_topics(isolation, topics.PLATFORM)
    pool = await create_pool(dsn=isolation.infra.database_url, schema=schema, max_size=3)
    producer = create_producer(
        bootstrap=isolation.infra.kafka, client_id="poison", max_record_bytes=MAX_EVENT_BYTES
    )  # as the runtime's
    await producer.start()
    relay = OutboxRelay(
        pool=pool, producer=producer, service=SERVICE, schema=schema, topic_prefix=isolation.topic_prefix
    )
    parked_before = _parked_count()
    poison = "x" * (2 * 1024 * 1024)
    assert len(poison) > MAX_EVENT_BYTES
    stop = asyncio.Event()
    task = asyncio.create_task(relay.run(stop))
    try:
        ids = []
        for name in ("before", poison, "after"):  # one key: one partition, one order
            async with PostgresUnitOfWork(pool=pool, source="test") as uow:
                ids.append(await uow.emit(TenantCreatedV1(tenant_id="same-key", name=name)))
                await uow.commit()
        async with TopicReader(
            bootstrap=isolation.infra.kafka, topic=f"{isolation.topic_prefix}{topics.PLATFORM}"
        ) as reader:
            events = await reader.wait_for(lambda ev: len(ev) >= 2, timeout=20, what="the two normal events")
            assert [p.name for _, p in events] == ["before", "after"]  # type: ignore[attr-defined]
            # the CloudEvents Kafka binding's structured mode: the header names the value's format
            assert [dict(r.headers).get("content-type") for r in reader.raw] == [
                b"application/cloudevents+json; charset=UTF-8"
            ] * 2
        await eventually(
            lambda: pool.fetchval("SELECT count(*) = 0 FROM outbox WHERE sent_at IS NULL"),
            what="nothing left to publish",
        )
        parked = await pool.fetch(
            "SELECT event_id::text, topic, error, length(payload) AS n FROM outbox_dead_letters"
        )
        assert [(r["event_id"], r["topic"]) for r in parked] == [(ids[1], topics.PLATFORM)]
        assert "MessageSizeTooLargeError" in parked[0]["error"]
        assert parked[0]["n"] > len(poison)  # the whole event is kept, to inspect or publish by hand
        assert await pool.fetchval("SELECT count(*) FROM outbox WHERE event_id = $1::uuid", ids[1]) == 0
        assert _parked_count() == parked_before + 1
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=15)
        await producer.stop()
        await pool.close()
    logged = [r for r in caplog.records if "outbox_dead_letters" in r.getMessage()]
    assert len(logged) == 1
