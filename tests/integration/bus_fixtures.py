"""Shared set-up for the bus tests: a migrated schema with an `applied_log`, and event producers."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence

import asyncpg
from aiokafka import TopicPartition

from libs.common.bus import create_producer, ensure_topics
from libs.common.bus.kafka import group_lag
from libs.common.db import migrate
from libs.common.db.migrate import PLATFORM_MIGRATIONS, discover
from libs.common.events import Envelope, encode, envelop, topics
from libs.common.events.platform import TenantCreatedV1
from tests.integration.support import Isolation
from tests.integration.workers.bus_worker import APPLIED_TABLE


async def prepare_schema(iso: Isolation, schema: str) -> None:
    """Platform tables plus the test's applied_log, in a schema of this test's own."""
    await migrate(
        dsn=iso.infra.database_url, schema=schema, migrations=discover(PLATFORM_MIGRATIONS, label="platform")
    )
    conn = await asyncpg.connect(iso.infra.database_url, server_settings={"search_path": schema})
    try:
        await conn.execute(APPLIED_TABLE)
    finally:
        await conn.close()


async def create_topics(iso: Isolation, *logical: str) -> None:
    names = [f"{iso.topic_prefix}{t}" for t in logical] + [f"{iso.topic_prefix}{t}.dlq" for t in logical]
    await ensure_topics(bootstrap=iso.infra.kafka, topics=names, partitions=3)


def tenant_events(count: int, *, prefix: str = "tenant") -> list[Envelope]:
    return [
        envelop(TenantCreatedV1(tenant_id=f"{prefix}-{i}", name=f"T{i}"), source="test") for i in range(count)
    ]


async def publish(iso: Isolation, envelopes: Sequence[Envelope], *, topic: str = topics.PLATFORM) -> None:
    producer = create_producer(bootstrap=iso.infra.kafka, client_id="test")
    await producer.start()
    try:
        futures = [
            await producer.send(f"{iso.topic_prefix}{topic}", value=encode(e), key=e.subject.encode())
            for e in envelopes
        ]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


async def applied(iso: Isolation, schema: str) -> tuple[int, int]:
    """(rows, distinct event ids) in the schema's applied_log."""
    conn = await asyncpg.connect(iso.infra.database_url, server_settings={"search_path": schema})
    try:
        row = await conn.fetchrow("SELECT count(*) AS n, count(DISTINCT event_id) AS d FROM applied_log")
        return int(row["n"]), int(row["d"])
    finally:
        await conn.close()


async def group_caught_up(iso: Isolation, group: str, topic: str, partitions: int = 3) -> bool:
    """True when the group's committed offsets reach the end of every partition."""
    tps = [TopicPartition(f"{iso.topic_prefix}{topic}", p) for p in range(partitions)]
    return await group_lag(bootstrap=iso.infra.kafka, group=group, partitions=tps) == 0


def worker_command(mode: str, iso: Isolation, schema: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "tests.integration.workers.bus_worker",
        mode,
        "--bootstrap",
        iso.infra.kafka,
        "--dsn",
        iso.infra.database_url,
        "--schema",
        schema,
        "--prefix",
        iso.topic_prefix,
    ]
