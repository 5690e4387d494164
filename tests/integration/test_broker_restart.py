"""A broker that restarts empty is survived: relays publish again what it lost, consumers read its new log.

Each test runs a broker of its own (the session's is shared), kills it with SIGKILL and starts an empty one
on the same port, as `make run`'s embedded broker does after a crash.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from aiokafka import AIOKafkaProducer

from libs.common.bus import ConsumerRunner, Handlers, OutboxRelay, create_consumer, create_producer
from libs.common.bus.kafka import ensure_topics
from libs.common.db import PostgresUnitOfWork, create_pool
from libs.common.events import topics
from libs.common.events.platform import TenantCreatedV1
from libs.devkit.broker import EmbeddedBroker
from tests.integration.bus_fixtures import applied, prepare_schema
from tests.integration.support import Isolation, eventually
from tests.integration.workers.bus_worker import record_applied

GROUP = "restart"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    """A broker of this test's own, so that killing it leaves the session's alone."""
    with EmbeddedBroker(log_path=tmp_path / "tansu.log") as own:
        yield own


@dataclass
class Bus:
    """One schema's outbox relay and a consumer of the platform topic, on the test's broker."""

    iso: Isolation
    broker: EmbeddedBroker
    schema: str
    pool: asyncpg.Pool[Any]
    producer: AIOKafkaProducer
    relay: OutboxRelay
    stop: asyncio.Event

    @property
    def topic(self) -> str:
        return f"{self.iso.topic_prefix}{topics.PLATFORM}"

    async def recreate(self, names: Sequence[str] | None = None) -> Sequence[str]:
        names = [self.topic, f"{self.topic}.dlq"] if names is None else names
        return await ensure_topics(bootstrap=self.broker.bootstrap, topics=names, partitions=3)

    async def emit(self, first: int, count: int) -> None:
        async with PostgresUnitOfWork(pool=self.pool, source="test") as uow:
            for i in range(first, first + count):
                await uow.emit(TenantCreatedV1(tenant_id=f"t-{i:03d}", name="T"))
            await uow.commit()

    async def all_sent(self) -> bool:
        return bool(await self.pool.fetchval("SELECT count(*) = 0 FROM outbox WHERE sent_at IS NULL"))

    @asynccontextmanager
    async def consuming(self) -> AsyncIterator[ConsumerRunner]:
        consumer = create_consumer(
            bootstrap=self.broker.bootstrap,
            group_id=f"{self.iso.topic_prefix}{GROUP}",
            topics=[self.topic],
            client_id="test",
        )
        await consumer.start()
        runner = ConsumerRunner(
            name=GROUP,
            service="test",
            consumer=consumer,
            producer=self.producer,
            uow_factory=lambda: PostgresUnitOfWork(pool=self.pool, source="test"),
            handlers=Handlers(None).on(TenantCreatedV1, record_applied),
            topic_prefix=self.iso.topic_prefix,
            recreate_topics=self.recreate,
        )
        stop = asyncio.Event()
        task = asyncio.create_task(runner.run(stop))
        try:
            yield runner
        finally:
            stop.set()
            await asyncio.wait_for(task, timeout=15)
            await consumer.stop()


@asynccontextmanager
async def relayed_bus(iso: Isolation, broker: EmbeddedBroker, name: str) -> AsyncIterator[Bus]:
    schema = iso.schema(name)
    await prepare_schema(iso, schema)
    pool = await create_pool(dsn=iso.infra.database_url, schema=schema, max_size=4)
    producer = create_producer(bootstrap=broker.bootstrap, client_id=name)
    await producer.start()
    bus = Bus(iso, broker, schema, pool, producer, None, asyncio.Event())  # type: ignore[arg-type]
    await bus.recreate()
    bus.relay = OutboxRelay(
        pool=pool,
        producer=producer,
        service="test",
        schema=schema,
        topic_prefix=iso.topic_prefix,
        poll_interval_s=0.2,
        recreate_topics=bus.recreate,
    )
    task = asyncio.create_task(bus.relay.run(bus.stop))
    try:
        yield bus
    finally:
        bus.stop.set()
        await asyncio.wait_for(task, timeout=15)
        await producer.stop()
        await pool.close()


async def restart_empty(broker: EmbeddedBroker, *, down_s: float = 3.0) -> None:
    """Kill the broker; after ``down_s`` (the clients retry meanwhile) start an empty one on its port."""
    before = broker.cluster_id
    broker.kill()
    await asyncio.sleep(down_s)
    broker.start()
    assert broker.cluster_id != before


async def _noticed(runner: ConsumerRunner) -> bool:
    return runner.incidents > 0  # aiokafka may have reset the positions itself (a group rejoin) first


async def applied_exactly(iso: Isolation, schema: str, count: int) -> bool:
    return await applied(iso, schema) == (count, count)


async def test_events_sent_to_a_broker_that_lost_them_are_published_again_and_applied_once(
    isolation: Isolation, broker: EmbeddedBroker
) -> None:
    async with relayed_bus(isolation, broker, "lost") as bus:
        async with bus.consuming():
            await bus.emit(0, 30)
            await eventually(
                lambda: applied_exactly(isolation, bus.schema, 30), timeout=30, what="30 applied"
            )
        await bus.emit(30, 30)  # published and marked sent while no one consumes: only the broker has them
        await eventually(bus.all_sent, timeout=30, what="the 30 unconsumed events published")

        await restart_empty(broker)
        async with bus.consuming():
            await bus.emit(60, 30)
            await eventually(
                lambda: applied_exactly(isolation, bus.schema, 90),
                timeout=60,
                interval=0.2,
                what="all 90 events applied once each, the 30 the broker lost among them",
            )
        assert bus.relay.replayed >= 60  # every kept row it had sent to the lost broker


async def test_a_consumer_running_through_the_restart_reads_the_new_log_from_its_beginning_and_says_so_once(
    isolation: Isolation, broker: EmbeddedBroker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    async with relayed_bus(isolation, broker, "through") as bus, bus.consuming() as runner:
        await bus.emit(0, 30)  # about ten per partition: positions the new log is far behind
        await eventually(lambda: applied_exactly(isolation, bus.schema, 30), timeout=30, what="30 applied")

        await restart_empty(broker)  # the clients retry meanwhile: each kind of failure is logged once
        await bus.emit(30, 6)
        await eventually(
            lambda: applied_exactly(isolation, bus.schema, 36),
            timeout=60,
            interval=0.2,
            what="the events published to the new broker applied, the republished ones skipped",
        )
        await eventually(lambda: _noticed(runner), timeout=15, what="the consumer to notice the new log")
        assert runner.incidents == 1
        assert runner.health.stalled(bound_s=0.0) is None  # applying again
    said = [r for r in caplog.records if r.name == "libs.common.bus.consumer" and "not the one" in r.message]
    assert len(said) == 1, [r.message for r in said]
    repeats = Counter((r.name, str(r.msg)) for r in caplog.records if r.name.startswith("aiokafka"))
    assert max(repeats.values(), default=1) == 1, repeats.most_common(3)
