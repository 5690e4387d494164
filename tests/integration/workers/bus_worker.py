"""A small process the delivery tests run and kill: a consumer that records what it applied,
or an outbox relay that dies between publishing and marking rows sent.

    python -m tests.integration.workers.bus_worker consume  --bootstrap B --dsn D --schema S --prefix P
    python -m tests.integration.workers.bus_worker relay-crash --bootstrap B --dsn D --schema S --prefix P
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
from typing import Any

from libs.common.bus import (
    ConsumerRunner,
    HandlerContext,
    Handlers,
    OutboxRelay,
    create_consumer,
    create_producer,
)
from libs.common.db import PostgresUnitOfWork, create_pool
from libs.common.events import topics
from libs.common.events.platform import TenantCreatedV1

APPLIED_TABLE = """
CREATE TABLE IF NOT EXISTS applied_log (
    tenant_id text NOT NULL,
    event_id  text NOT NULL,
    at        timestamptz NOT NULL DEFAULT clock_timestamp()
)
"""


async def record_applied(event: TenantCreatedV1, ctx: HandlerContext) -> None:
    """Apply = append a row; slow enough that a kill lands in the middle of a batch."""
    await ctx.uow.conn.execute(
        "INSERT INTO applied_log (tenant_id, event_id) VALUES ($1, $2)", event.tenant_id, ctx.envelope.id
    )
    await ctx.uow.conn.execute("SELECT pg_sleep(0.002)")


async def consume(args: argparse.Namespace) -> None:
    pool = await create_pool(dsn=args.dsn, schema=args.schema, max_size=4)
    producer = create_producer(bootstrap=args.bootstrap, client_id="worker")
    consumer = create_consumer(
        bootstrap=args.bootstrap,
        group_id=f"{args.prefix}worker",
        topics=[f"{args.prefix}{topics.PLATFORM}"],
        client_id="worker",
    )
    await producer.start()
    await consumer.start()
    runner = ConsumerRunner(
        name="worker",
        service="worker",
        consumer=consumer,
        producer=producer,
        uow_factory=lambda: PostgresUnitOfWork(pool=pool, source="worker"),
        handlers=Handlers(None).on(TenantCreatedV1, record_applied),
        topic_prefix=args.prefix,
    )
    print("ready", flush=True)
    await runner.run(asyncio.Event())


class CrashingRelay(OutboxRelay):
    """Publishes a batch with acks=all, then dies by SIGKILL before marking the rows sent."""

    async def _mark_sent(self, conn: Any, seqs: list[int]) -> None:
        print(f"published {len(seqs)}; dying before marking them sent", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)


async def relay_crash(args: argparse.Namespace) -> None:
    pool = await create_pool(dsn=args.dsn, schema=args.schema, max_size=2)
    producer = create_producer(bootstrap=args.bootstrap, client_id="relay")
    await producer.start()
    relay = CrashingRelay(
        pool=pool,
        producer=producer,
        service="worker",
        schema=args.schema,
        topic_prefix=args.prefix,
        batch_size=10_000,
    )
    await relay.publish_batch()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["consume", "relay-crash"])
    for name in ("--bootstrap", "--dsn", "--schema", "--prefix"):
        parser.add_argument(name, required=True)
    args = parser.parse_args()
    asyncio.run(consume(args) if args.mode == "consume" else relay_crash(args))


if __name__ == "__main__":
    main()
