"""The bus itself: events per second through outbox -> broker -> consumer with inbox dedupe on
Postgres, and publish-to-handled latency (commit of the producing transaction to the consumer's
commit) at a steady rate.

    python bench/bus_throughput.py [--events 20000] [--rate 200] [--seconds 15]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import asyncpg

from bench.common import BenchEnv, emit, log, percentile
from libs.common.bus import (
    ConsumerRunner,
    HandlerContext,
    Handlers,
    OutboxRelay,
    create_consumer,
    create_producer,
    ensure_topics,
)
from libs.common.db import PostgresUnitOfWork, create_pool, migrate
from libs.common.db.migrate import PLATFORM_MIGRATIONS, discover
from libs.common.events import topics
from libs.common.events.platform import TenantCreatedV1
from libs.devkit.broker import EmbeddedBroker

BENCH = "bus.outbox_to_consumer"


class Recorder:
    """The consumer's handler: records each event's publish-to-handled latency."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.handled = 0

    async def __call__(self, event: TenantCreatedV1, ctx: HandlerContext) -> None:
        await ctx.uow.conn.execute("INSERT INTO handled (event_id) VALUES ($1)", ctx.envelope.id)
        self.latencies.append((datetime.now(UTC) - ctx.envelope.time).total_seconds())
        self.handled += 1


async def _produce(pool: asyncpg.Pool, count: int, per_tx: int, rate: float | None) -> None:
    sent = 0
    started = time.monotonic()
    while sent < count:
        async with PostgresUnitOfWork(pool=pool, source="bench") as uow:
            for _ in range(min(per_tx, count - sent)):
                await uow.emit(TenantCreatedV1(tenant_id=f"t-{sent}", name="bench"))
                sent += 1
            await uow.commit()
        if rate:
            await asyncio.sleep(max(0.0, started + sent / rate - time.monotonic()))


async def _wait_handled(recorder: Recorder, target: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while recorder.handled < target and time.monotonic() < deadline:
        await asyncio.sleep(0.02)


async def run(args: argparse.Namespace, bootstrap: str) -> None:
    env = BenchEnv.create()
    schema = env.schema("bus")
    await migrate(
        dsn=env.database_url, schema=schema, migrations=discover(PLATFORM_MIGRATIONS, label="platform")
    )
    pool = await create_pool(dsn=env.database_url, schema=schema, max_size=6)
    await pool.execute("CREATE TABLE handled (event_id uuid PRIMARY KEY)")
    topic = f"{env.topic_prefix}{topics.PLATFORM}"
    await ensure_topics(bootstrap=bootstrap, topics=[topic, topic + ".dlq"], partitions=3)
    producer = create_producer(bootstrap=bootstrap, client_id="bench")
    consumer = create_consumer(
        bootstrap=bootstrap, group_id=f"{env.topic_prefix}g", topics=[topic], client_id="b"
    )
    await producer.start()
    await consumer.start()
    recorder = Recorder()
    stop = asyncio.Event()
    relay = OutboxRelay(
        pool=pool,
        producer=producer,
        service="bench",
        schema=schema,
        topic_prefix=env.topic_prefix,
        poll_interval_s=0.5,
    )
    runner = ConsumerRunner(
        name="bench",
        service="bench",
        consumer=consumer,
        producer=producer,
        uow_factory=lambda: PostgresUnitOfWork(pool=pool, source="bench"),
        handlers=Handlers(None).on(TenantCreatedV1, recorder),
        topic_prefix=env.topic_prefix,
    )
    tasks = [asyncio.create_task(relay.run(stop)), asyncio.create_task(runner.run(stop))]
    try:
        await _produce(pool, 50, 50, None)  # warm-up: group join, connections
        await _wait_handled(recorder, 50, 60)
        log(f"throughput phase: {args.events} events")
        recorder.latencies.clear()
        base = recorder.handled
        started = time.monotonic()
        await _produce(pool, args.events, 200, None)
        await _wait_handled(recorder, base + args.events, 300)
        elapsed = time.monotonic() - started
        emit(BENCH, "events_per_s", args.events / elapsed, "1/s", events=args.events)
        log(f"latency phase: {args.rate}/s for {args.seconds}s")
        recorder.latencies.clear()
        base = recorder.handled
        steady = int(args.rate * args.seconds)
        await _produce(pool, steady, 1, args.rate)
        await _wait_handled(recorder, base + steady, 60)
        lat = recorder.latencies
        emit(BENCH, "publish_to_handled_p50", percentile(lat, 50) * 1000, "ms", rate_per_s=args.rate)
        emit(BENCH, "publish_to_handled_p99", percentile(lat, 99) * 1000, "ms", rate_per_s=args.rate)
        dupes = await pool.fetchval("SELECT count(*) - count(DISTINCT event_id) FROM inbox")
        emit(BENCH, "duplicates_applied", float(dupes), "count")
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        await consumer.stop()
        await producer.stop()
        await pool.execute(f'DROP SCHEMA "{schema}" CASCADE')
        await pool.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=20000)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--seconds", type=float, default=15.0)
    args = parser.parse_args()
    with EmbeddedBroker() as broker:
        asyncio.run(run(args, broker.bootstrap))


if __name__ == "__main__":
    main()
