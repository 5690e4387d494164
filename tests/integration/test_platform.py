"""The platform against the real broker, Postgres and Redis: Kafka features the bus relies on,
traces across processes' boundaries, migrations racing, the unit-of-work contract, probes and auth."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client.parser import text_string_to_metric_families

from libs.common.bus import create_consumer, create_producer, ensure_topics
from libs.common.bus.kafka import group_lag, log_end_offsets
from libs.common.db import PostgresUnitOfWork, create_pool, migrate
from libs.common.db.migrate import service_migrations
from libs.common.events.platform import TenantCreatedV1
from libs.common.observability import setup_tracing
from libs.common.testing import FakeUnitOfWork
from services.inventory.app import create_app as inventory_app
from services.inventory.settings import InventorySettings
from services.scheduler.app import create_app as scheduler_app
from services.scheduler.settings import SchedulerSettings
from tests.integration.support import ADMIN_HEADERS, Isolation, eventually, running


async def test_broker_supports_every_kafka_feature_the_bus_relies_on(isolation: Isolation) -> None:
    kafka, topic = isolation.infra.kafka, f"{isolation.topic_prefix}compat"
    assert await ensure_topics(bootstrap=kafka, topics=[topic], partitions=3) == [topic]
    assert await ensure_topics(bootstrap=kafka, topics=[topic], partitions=3) == []  # idempotent creation
    producer = create_producer(bootstrap=kafka, client_id="compat")  # acks=all, gzip
    await producer.start()
    try:
        sent = [
            await producer.send_and_wait(
                topic, value=f"v{i}".encode(), key=f"k{i % 4}".encode(), headers=[("traceparent", b"tp")]
            )
            for i in range(40)
        ]
    finally:
        await producer.stop()
    assert {m.partition for m in sent} <= {0, 1, 2}
    by_key: dict[bytes, set[int]] = {}
    group = f"{isolation.topic_prefix}compat-group"
    first = create_consumer(bootstrap=kafka, group_id=group, topics=[topic], client_id="c1")
    await first.start()
    try:
        seen: list[Any] = []  # aiokafka's ConsumerRecords (the library is untyped)
        while len(seen) < 40:
            for tp, records in (await first.getmany(timeout_ms=500)).items():
                seen += records
                for r in records:
                    by_key.setdefault(r.key, set()).add(r.partition)
                await first.commit({tp: records[-1].offset + 1})  # manual commit
        assert all(dict(r.headers)["traceparent"] == b"tp" for r in seen)  # headers survive
        assert all(len(parts) == 1 for parts in by_key.values())  # one key, one partition: order per key
        second = create_consumer(bootstrap=kafka, group_id=group, topics=[topic], client_id="c2")
        await second.start()  # a second member joins: the group rebalances and splits the partitions
        try:

            async def split() -> bool:
                await asyncio.gather(first.getmany(timeout_ms=200), second.getmany(timeout_ms=200))
                return bool(first.assignment()) and bool(second.assignment())

            await eventually(split, timeout=30, what="partitions shared by two members")
            assert first.assignment() | second.assignment() == {TopicPartition(topic, p) for p in range(3)}
            assert not first.assignment() & second.assignment()
        finally:
            await second.stop()
    finally:
        await first.stop()
    probe = AIOKafkaConsumer(bootstrap_servers=kafka, group_id=group, enable_auto_commit=False)
    await probe.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(3)]
        ends = await probe.end_offsets(tps)  # log end offsets: the basis of consumer lag
        committed = {tp: await probe.committed(tp) for tp in tps}
        assert sum(ends.values()) == 40
        assert committed == ends
    finally:
        await probe.stop()


async def test_log_end_offsets_and_group_lag_count_every_record_of_a_partitions_last_batch(
    isolation: Isolation,
) -> None:
    kafka, topic = isolation.infra.kafka, f"{isolation.topic_prefix}batched"
    await ensure_topics(bootstrap=kafka, topics=[topic], partitions=2)
    producer = create_producer(bootstrap=kafka, client_id="batched")
    await producer.start()
    try:  # sent together: one batch of six records on partition 0, nothing on partition 1
        acks = [await producer.send(topic, value=f"v{i}".encode(), partition=0) for i in range(6)]
        await asyncio.gather(*acks)
    finally:
        await producer.stop()
    first, second = TopicPartition(topic, 0), TopicPartition(topic, 1)
    assert await log_end_offsets(bootstrap=kafka, partitions=[first, second]) == {first: 6, second: 0}
    group = f"{isolation.topic_prefix}batched-group"
    assert await group_lag(bootstrap=kafka, group=group, partitions=[first, second]) == 6
    consumer = create_consumer(bootstrap=kafka, group_id=group, topics=[topic], client_id="batched")
    await consumer.start()
    try:
        await eventually(
            lambda: _read_and_commit(consumer, first, upto=4), timeout=30, what="4 records committed"
        )
    finally:
        await consumer.stop()
    assert await group_lag(bootstrap=kafka, group=group, partitions=[first, second]) == 2


async def _read_and_commit(consumer: AIOKafkaConsumer, tp: TopicPartition, *, upto: int) -> bool:
    await consumer.getmany(timeout_ms=200)
    if consumer.assignment() and await consumer.position(tp) >= upto:
        await consumer.commit({tp: upto})
        return True
    return False


async def test_one_trace_links_http_request_produced_event_and_consumer_handling(
    isolation: Isolation,
) -> None:
    exporter = InMemorySpanExporter()
    setup_tracing(service_name="tests", exporters=[exporter])
    sched = scheduler_app(isolation.settings(SchedulerSettings, "scheduler"))
    inv = inventory_app(isolation.settings(InventorySettings, "inventory"))
    async with running(sched) as client, running(inv):
        response = await client.post(
            "/v1/admin/tenants", json={"tenant_id": "traced", "name": "T"}, headers=ADMIN_HEADERS
        )
        assert response.status_code == 201

        async def handled_by_inventory() -> list[object]:
            return [
                s
                for s in exporter.get_finished_spans()
                if s.name == "platform.tenants process"
                and s.attributes
                and s.attributes.get("gpucloud.event_type") == "platform.tenant.created.v1"
                and s.resource.attributes.get("service.name")
            ]

        await eventually(handled_by_inventory, timeout=30, what="inventory handling the tenant event")
    spans = exporter.get_finished_spans()
    http = [s for s in spans if s.kind.name == "SERVER" and "/v1/admin/tenants" in s.name]
    publish = [s for s in spans if s.name == "platform.tenants publish"]
    process = [s for s in spans if s.name == "platform.tenants process"]
    assert http
    assert publish
    assert process
    trace_id = http[0].context.trace_id
    assert any(s.context.trace_id == trace_id for s in publish)
    # both services consume their own copy: the scheduler's and the inventory's handling share the trace
    assert sum(1 for s in process if s.context.trace_id == trace_id) >= 2


async def test_two_replicas_migrating_at_once_apply_each_migration_once(isolation: Isolation) -> None:
    schema = isolation.schema("race")
    migrations = service_migrations("billing")
    results = await asyncio.gather(
        *[migrate(dsn=isolation.infra.database_url, schema=schema, migrations=migrations) for _ in range(4)]
    )
    applied = [m for r in results for m in r]
    assert sorted(applied) == sorted(m.id for m in migrations)
    conn = await asyncpg.connect(isolation.infra.database_url)
    try:
        rows = await conn.fetchval(f'SELECT count(*) FROM "{schema}".schema_migrations')
    finally:
        await conn.close()
    assert rows == len(migrations)


@pytest.mark.parametrize("kind", ["fake", "postgres"])
async def test_unit_of_work_contract_commit_keeps_events_and_after_commit_actions_rollback_drops_them(
    isolation: Isolation, kind: str
) -> None:
    schema = isolation.schema("uow")
    await migrate(
        dsn=isolation.infra.database_url, schema=schema, migrations=service_migrations("billing")[:1]
    )
    pool = await create_pool(dsn=isolation.infra.database_url, schema=schema)
    fake = FakeUnitOfWork()

    def new() -> PostgresUnitOfWork | FakeUnitOfWork:
        return fake if kind == "fake" else PostgresUnitOfWork(pool=pool, source="test")

    async def committed() -> list[str]:
        if kind == "fake":
            return [e.tenant_id for e in fake.events]  # type: ignore[attr-defined]
        rows = await pool.fetch("SELECT key FROM outbox ORDER BY seq")
        return [r["key"] for r in rows]

    done: list[str] = []
    try:
        async with new() as uow:
            await uow.emit(TenantCreatedV1(tenant_id="rolled-back", name="x"))
            uow.after_commit(lambda: done.append("rolled-back"))
        with pytest.raises(RuntimeError, match="boom"):
            await _emit_then_fail(new())
        async with new() as uow:
            await uow.emit(TenantCreatedV1(tenant_id="kept", name="x"))
            many = [TenantCreatedV1(tenant_id=f"kept-{i}", name="x") for i in range(3)]
            ids = await uow.emit_many(many)
            assert len(set(ids)) == 3
            assert await uow.emit_many([]) == []
            uow.after_commit(lambda: done.append("kept"))
            assert done == []  # not before the commit
            await uow.commit()
        assert done == ["kept"]  # once committed, and never for the rolled-back block
        async with new() as uow:
            await uow.emit_many([TenantCreatedV1(tenant_id="many-rolled-back", name="x")])
        assert await committed() == ["kept", "kept-0", "kept-1", "kept-2"]
        with pytest.raises(RuntimeError):
            await new().emit(TenantCreatedV1(tenant_id="outside", name="x"))
    finally:
        await pool.close()


async def _emit_then_fail(uow: PostgresUnitOfWork | FakeUnitOfWork) -> None:
    async with uow:
        await uow.emit(TenantCreatedV1(tenant_id="failed", name="x"))
        raise RuntimeError("boom")


async def test_probes_metrics_and_auth_answer_as_documented(isolation: Isolation) -> None:
    app = scheduler_app(isolation.settings(SchedulerSettings, "scheduler"))
    async with running(app) as client:
        assert (await client.get("/healthz")).json()["status"] == "ok"
        ready = await client.get("/readyz")
        assert ready.status_code == 200
        assert ready.json()["checks"] == {"postgres": "ok", "redis": "ok", "kafka": "ok"}
        assert (await client.get("/v1/admin/tenants")).status_code == 401
        created = await client.post(
            "/v1/admin/tenants", json={"tenant_id": "acme", "name": "Acme"}, headers=ADMIN_HEADERS
        )
        tenant_key = created.json()["key"]["api_key"]
        forbidden = await client.get("/v1/admin/tenants", headers={"Authorization": f"Bearer {tenant_key}"})
        assert forbidden.status_code == 403
        duplicate = await client.post(
            "/v1/admin/tenants", json={"tenant_id": "acme", "name": "A"}, headers=ADMIN_HEADERS
        )
        assert duplicate.status_code == 409
        assert duplicate.json()["error"]["field"] == "tenant_id"
        bad = await client.post(
            "/v1/admin/tenants", json={"tenant_id": "ACME!", "name": "A"}, headers=ADMIN_HEADERS
        )
        assert bad.status_code == 422
        assert bad.json()["error"]["field"] == "tenant_id"
        listed = await client.get("/v1/admin/tenants", headers=ADMIN_HEADERS)
        assert [t["tenant_id"] for t in listed.json()] == ["acme"]
        revoke = await client.delete(
            f"/v1/admin/keys/{created.json()['key']['key_id']}", headers=ADMIN_HEADERS
        )
        assert revoke.status_code == 204
        assert (await client.get("/v1/admin/tenants", headers={"X-API-Key": tenant_key})).status_code == 401
        metrics = (await client.get("/metrics")).text
        names = {f.name for f in text_string_to_metric_families(metrics)}
        assert {"gpucloud_http_request_duration_seconds", "gpucloud_events_produced"} <= names


async def test_readiness_reports_an_unreachable_dependency(isolation: Isolation) -> None:
    app = scheduler_app(isolation.settings(SchedulerSettings, "scheduler"))
    async with running(app) as client:
        await app.state.runtime.redis.connection_pool.disconnect()
        app.state.runtime._redis = __import__("redis.asyncio", fromlist=["Redis"]).Redis(
            port=1
        )  # nothing listens
        response = await client.get("/readyz")
        assert response.status_code == 503
        assert response.json()["checks"]["redis"] != "ok"
        assert response.json()["checks"]["postgres"] == "ok"
        await app.state.runtime._redis.aclose()
        app.state.runtime._redis = None
