"""The bus's promises, proven against the real broker and Postgres, with real processes killed."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypedDict, Unpack

import asyncpg
from aiokafka import AIOKafkaProducer

from libs.common.bus import (
    ConsumerRunner,
    HandlerContext,
    Handlers,
    OutboxRelay,
    RetryPolicy,
    create_consumer,
    create_producer,
)
from libs.common.bus import relay as relay_module
from libs.common.db import PostgresUnitOfWork, create_pool
from libs.common.db.locks import advisory_lock_holder
from libs.common.events import topics
from libs.common.events.platform import TenantCreatedV1
from tests.integration.bus_fixtures import (
    applied,
    create_topics,
    group_caught_up,
    prepare_schema,
    publish,
    tenant_events,
    worker_command,
)
from tests.integration.support import Isolation, TopicReader, eventually
from tests.integration.workers.bus_worker import record_applied


@asynccontextmanager
async def consumer_running(
    iso: Isolation,
    schema: str,
    handler: Callable[[TenantCreatedV1, HandlerContext[None]], Awaitable[None]],
    *,
    group: str = "inproc",
    attempts: int = 5,
) -> AsyncIterator[ConsumerRunner]:
    pool = await create_pool(dsn=iso.infra.database_url, schema=schema, max_size=4)
    producer = create_producer(bootstrap=iso.infra.kafka, client_id="test")
    consumer = create_consumer(
        bootstrap=iso.infra.kafka,
        group_id=f"{iso.topic_prefix}{group}",
        topics=[f"{iso.topic_prefix}{topics.PLATFORM}"],
        client_id="test",
    )
    await producer.start()
    await consumer.start()
    runner = ConsumerRunner(
        name=group,
        service="test",
        consumer=consumer,
        producer=producer,
        uow_factory=lambda: PostgresUnitOfWork(pool=pool, source="test"),
        handlers=Handlers(None).on(TenantCreatedV1, handler),
        topic_prefix=iso.topic_prefix,
        retry=RetryPolicy(max_attempts=attempts, base_s=0.01, max_s=0.05),
    )
    stop = asyncio.Event()
    task = asyncio.create_task(runner.run(stop))
    try:
        yield runner
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=10)
        await consumer.stop()
        await producer.stop()
        await pool.close()


async def test_consumer_killed_mid_batch_applies_every_event_exactly_once(isolation: Isolation) -> None:
    schema = isolation.schema("killed")
    await prepare_schema(isolation, schema)
    await create_topics(isolation, topics.PLATFORM)
    events = tenant_events(1500)
    await publish(isolation, events)
    await publish(isolation, events[:200])  # redelivered duplicates on the wire, same event ids

    worker = subprocess.Popen(worker_command("consume", isolation, schema))
    try:
        await eventually(lambda: _at_least(isolation, schema, 300), timeout=60, what="some events applied")
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=10)
        rows_at_kill, _ = await applied(isolation, schema)
        assert rows_at_kill < 1500, "the kill must land before the stream is done"
    finally:
        worker.kill()
    restarted = subprocess.Popen(worker_command("consume", isolation, schema))
    try:
        await eventually(
            lambda: group_caught_up(isolation, f"{isolation.topic_prefix}worker", topics.PLATFORM),
            timeout=90,
            interval=0.5,
            what="restarted consumer to commit to the end",
        )
    finally:
        restarted.kill()
        restarted.wait(timeout=10)
    assert await applied(isolation, schema) == (1500, 1500)


async def _at_least(iso: Isolation, schema: str, n: int) -> bool:
    return (await applied(iso, schema))[0] >= n


async def test_failing_handler_sends_event_to_dlq_and_partition_keeps_flowing(isolation: Isolation) -> None:
    schema = isolation.schema("dlq")
    await prepare_schema(isolation, schema)
    await create_topics(isolation, topics.PLATFORM)
    attempts: list[str] = []

    async def fail_on_poison(event: TenantCreatedV1, ctx: HandlerContext) -> None:
        if event.tenant_id == "poison":
            attempts.append(ctx.envelope.id)
            raise RuntimeError("cannot apply poison")
        await record_applied(event, ctx)

    events = [TenantCreatedV1(tenant_id="poison", name="P")] + [
        TenantCreatedV1(tenant_id=f"ok-{i}", name="ok") for i in range(10)
    ]
    # One key for all: they share a partition, so the good events queue behind the poison.
    from libs.common.events import envelop

    envelopes = [envelop(e, source="test").model_copy(update={"subject": "same-key"}) for e in events]
    await publish(isolation, envelopes)
    async with consumer_running(isolation, schema, fail_on_poison, attempts=3):
        await eventually(lambda: _at_least(isolation, schema, 10), timeout=30, what="events after the poison")
    assert len(attempts) == 3
    async with TopicReader(
        bootstrap=isolation.infra.kafka, topic=f"{isolation.topic_prefix}{topics.PLATFORM}.dlq"
    ) as dlq:
        await dlq.wait_for(lambda ev: len(ev) >= 1, what="the dead letter")
        [record] = dlq.raw
        headers = dict(record.headers)
        assert b"cannot apply poison" in headers["dlq.error"]
        assert headers["dlq.attempts"] == b"3"
    conn = await asyncpg.connect(isolation.infra.database_url, server_settings={"search_path": schema})
    try:
        status = await conn.fetchval("SELECT status FROM inbox WHERE event_id = $1", envelopes[0].id)
        dead = await conn.fetchval("SELECT count(*) FROM dead_letters")
    finally:
        await conn.close()
    assert status == "dead_lettered"
    assert dead == 1
    assert await applied(isolation, schema) == (10, 10)


async def test_relay_killed_after_publishing_republishes_and_consumer_dedupes(isolation: Isolation) -> None:
    schema = isolation.schema("relay")
    await prepare_schema(isolation, schema)
    await create_topics(isolation, topics.PLATFORM)
    pool = await create_pool(dsn=isolation.infra.database_url, schema=schema, max_size=2)
    try:
        async with PostgresUnitOfWork(pool=pool, source="test") as uow:
            for i in range(200):
                await uow.emit(TenantCreatedV1(tenant_id=f"t-{i}", name="T"))
            await uow.commit()
        crashed = subprocess.run(worker_command("relay-crash", isolation, schema), timeout=60, check=False)
        assert crashed.returncode == -signal.SIGKILL
        assert await pool.fetchval("SELECT count(*) FROM outbox WHERE sent_at IS NULL") == 200

        producer = create_producer(bootstrap=isolation.infra.kafka, client_id="relay2")
        await producer.start()
        relay = OutboxRelay(
            pool=pool, producer=producer, service="test", schema=schema, topic_prefix=isolation.topic_prefix
        )
        assert await relay.publish_batch() == 200
        await producer.stop()
        assert await relay.backlog() == 0
        pruner = OutboxRelay(pool=pool, producer=producer, service="test", schema=schema, retention_s=0)
        assert await pruner.prune() == 200  # sent rows past the retention are dropped, unsent ones never
    finally:
        await pool.close()

    async with TopicReader(
        bootstrap=isolation.infra.kafka, topic=f"{isolation.topic_prefix}{topics.PLATFORM}"
    ) as reader:
        await reader.wait_for(lambda ev: len(ev) >= 400, what="both publications on the wire")
        assert len({env.id for env, _ in reader.events}) == 200
    async with consumer_running(isolation, schema, record_applied):
        await eventually(
            lambda: group_caught_up(isolation, f"{isolation.topic_prefix}inproc", topics.PLATFORM),
            timeout=30,
            interval=0.2,
            what="consumer to reach the end",
        )
    assert await applied(isolation, schema) == (200, 200)


class _CommitsDuringBatch(OutboxRelay):
    """A relay whose first batch sees another transaction commit an event while it publishes."""

    def __init__(self, *, pool: Any, on_first_batch: Callable[[], Awaitable[None]], **kw: Any) -> None:
        super().__init__(pool=pool, **kw)
        self._on_first_batch: Callable[[], Awaitable[None]] | None = on_first_batch

    async def _publish(self, rows: list[asyncpg.Record]) -> None:
        hook, self._on_first_batch = self._on_first_batch, None
        if hook is not None:
            await hook()
        await super()._publish(rows)


class _PoolSize(TypedDict, total=False):
    min_size: int
    max_size: int


@asynccontextmanager
async def _relay_schema(
    iso: Isolation, name: str, **pool_args: Unpack[_PoolSize]
) -> AsyncIterator[tuple[str, asyncpg.Pool[Any], AIOKafkaProducer]]:
    """A schema of the test's own with the platform tables and topic, a pool on it and a started producer."""
    schema = iso.schema(name)
    await prepare_schema(iso, schema)
    await create_topics(iso, topics.PLATFORM)
    pool = await create_pool(dsn=iso.infra.database_url, schema=schema, **pool_args)
    producer = create_producer(bootstrap=iso.infra.kafka, client_id=name)
    await producer.start()
    try:
        yield schema, pool, producer
    finally:
        await producer.stop()
        await pool.close()


async def test_an_event_committed_while_the_relay_publishes_is_not_left_for_the_fallback_poll(
    isolation: Isolation,
) -> None:
    async with _relay_schema(isolation, "relay_wake", max_size=4) as (schema, pool, producer):

        async def emit(tenant: str) -> None:
            async with PostgresUnitOfWork(pool=pool, source="test") as uow:
                await uow.emit(TenantCreatedV1(tenant_id=tenant, name="T"))
                await uow.commit()  # NOTIFYs the relay

        async def second_commit() -> None:
            await emit("t-during")
            await asyncio.sleep(0.3)  # its NOTIFY reaches the relay while this batch is still publishing

        relay = _CommitsDuringBatch(
            pool=pool,
            on_first_batch=second_commit,
            producer=producer,
            service="test",
            schema=schema,
            topic_prefix=isolation.topic_prefix,
            poll_interval_s=60.0,  # far beyond the wait below: only a kept wake-up can publish in time
        )
        stop = asyncio.Event()
        running_relay = asyncio.create_task(relay.run(stop))
        try:
            async with TopicReader(
                bootstrap=isolation.infra.kafka, topic=f"{isolation.topic_prefix}{topics.PLATFORM}"
            ) as reader:
                await asyncio.sleep(0.5)  # the relay is listening and idle
                await emit("t-first")
                events = await reader.wait_for(lambda ev: len(ev) >= 2, timeout=15, what="both events")
                assert sorted(p.tenant_id for _, p in events) == ["t-during", "t-first"]  # type: ignore[attr-defined]
        finally:
            stop.set()
            await running_relay


async def test_one_relay_publishes_at_a_time_and_a_standby_takes_over_when_its_connection_dies(
    isolation: Isolation,
) -> None:
    schema = isolation.schema("relay_pair")
    await prepare_schema(isolation, schema)
    await create_topics(isolation, topics.PLATFORM)
    pools = [await create_pool(dsn=isolation.infra.database_url, schema=schema, max_size=3) for _ in "ab"]
    producer = create_producer(bootstrap=isolation.infra.kafka, client_id="relay-pair")
    await producer.start()
    relays = [
        OutboxRelay(
            pool=pool, producer=producer, service="test", schema=schema, topic_prefix=isolation.topic_prefix
        )
        for pool in pools
    ]

    async def emit(first: int, count: int) -> None:
        async with PostgresUnitOfWork(pool=pools[0], source="test") as uow:
            for i in range(first, first + count):  # one key, so one partition and one order
                await uow.emit(TenantCreatedV1(tenant_id="t-1", name=f"n-{i:03d}"))
            await uow.commit()

    def names(events: list[Any]) -> list[str]:
        return [p.name for _, p in events]

    stop = asyncio.Event()
    tasks = [asyncio.create_task(r.run(stop)) for r in relays]
    try:
        async with TopicReader(
            bootstrap=isolation.infra.kafka, topic=f"{isolation.topic_prefix}{topics.PLATFORM}"
        ) as reader:
            await asyncio.sleep(0.5)  # both relays listening: one holds the lock, one stands by
            for n in range(5):
                await emit(10 * n, 10)
            await reader.wait_for(lambda ev: len(ev) >= 50, timeout=15, what="the first 50 events")
            await asyncio.sleep(1.0)  # a second relay publishing too would show up as duplicates here
            assert names(await reader.poll()) == [f"n-{i:03d}" for i in range(50)], (
                "published once each, in outbox order, by one relay"
            )

            holder = await advisory_lock_holder(pools[0], f"gpucloud.relay.{schema}")
            assert holder is not None, "the publishing relay holds the schema's lock"
            assert await pools[0].fetchval("SELECT pg_terminate_backend($1)", holder)
            for n in range(5, 10):
                await emit(10 * n, 10)
            events = await reader.wait_for(
                lambda ev: len(set(names(ev))) >= 100, timeout=20, what="all 100 events after the takeover"
            )
            first_seen = list(dict.fromkeys(names(events)))
            assert first_seen == [f"n-{i:03d}" for i in range(100)], "nothing lost and the key's order kept"
    finally:
        stop.set()
        await asyncio.gather(*tasks)
        await producer.stop()
        for pool in pools:
            await pool.close()


async def test_the_relay_reads_unsent_rows_through_the_index_and_hands_its_connection_back_unchanged(
    isolation: Isolation,
) -> None:
    async with _relay_schema(isolation, "relay_reads", min_size=2, max_size=2) as (schema, pool, producer):
        relay = OutboxRelay(
            pool=pool, producer=producer, service="test", schema=schema, topic_prefix=isolation.topic_prefix
        )
        async with PostgresUnitOfWork(pool=pool, source="test") as uow:
            for i in range(300):
                await uow.emit(TenantCreatedV1(tenant_id=f"t-{i}", name=f"n-{i}"))
            await uow.commit()
        # Sent rows leave the partial index's predicate, but their entries stay until a vacuum.
        await pool.execute("UPDATE outbox SET sent_at = now() WHERE seq <= (SELECT max(seq) - 3 FROM outbox)")

        async with pool.acquire() as conn, conn.transaction():
            await relay_module._configure(conn, local=True)
            plan = await conn.fetchval(f"EXPLAIN (FORMAT JSON) {relay_module._SELECT}", 500)
        nodes = json.dumps(plan)
        assert '"Index Name": "outbox_unsent"' in nodes, nodes
        assert "Bitmap" not in nodes, "a bitmap scan never marks the sent rows' entries dead"
        assert '"Node Type": "Sort"' not in nodes, "the index's order is the read's order"

        stop = asyncio.Event()
        task = asyncio.create_task(relay.run(stop))  # one connection of the pool is the relay's while it runs
        watcher = await asyncpg.connect(isolation.infra.database_url, server_settings={"search_path": schema})
        try:
            await eventually(lambda: _none_unsent(watcher), what="the three unsent rows published")
        finally:
            await watcher.close()
        stop.set()
        await asyncio.wait_for(task, timeout=10)
        # Both of the pool's connections, one of them the relay's: each has the defaults again.
        async with pool.acquire() as first, pool.acquire() as second:
            changed = [
                row["name"]
                for conn in (first, second)
                for row in await conn.fetch(
                    "SELECT name FROM pg_settings WHERE name = ANY($1::text[]) AND setting <> reset_val",
                    list(relay_module._SESSION),
                )
            ]
        assert changed == [], changed


async def _none_unsent(conn: asyncpg.Connection[Any]) -> bool:
    return bool(await conn.fetchval("SELECT count(*) = 0 FROM outbox WHERE sent_at IS NULL"))
