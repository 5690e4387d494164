"""Billing: ledger ingest through the real consumer, and a 1,000,000-row streamed project export.

(a) postings_per_s: the billing app runs in-process against the embedded broker, Postgres and
    Redis; lifecycle events (placed, then ended a day later) are published, and the clock runs from
    the first publish to every allocation closed. Each workload rates into 1,440 one-minute charge
    lines, each a balanced entry of two postings, all posted by the consumer's handlers.
    cpu_us_per_posting is this process's CPU over the same window (publisher + consumer), and
    db_cpu_us_per_posting that of the app pool's Postgres backends (read from /proc when Postgres
    runs on this host; omitted otherwise): steadier guides than wall clock on a shared machine.
(b) export: 1,000,000 postings (500,000 entries) for one project are loaded with COPY, then a child
    process streams the export through export_totals + export_chunks (the code behind
    GET /v1/exports/{project}) into a byte counter; it reports seconds and its own peak RSS.

    python bench/billing_ledger.py [--workloads 40] [--rows 1000000] [--formats csv,parquet]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import asyncpg

from bench.common import BenchEnv, cpu_seconds, emit, log
from libs.common.bus import create_producer
from libs.common.db import migrate, service_migrations
from libs.common.events import encode, envelop, topics
from libs.common.events.scheduler import AllocationItem, WorkloadEndedV1, WorkloadPlacedV1, WorkloadRunningV1
from libs.devkit.broker import EmbeddedBroker

T0 = datetime(2025, 1, 1, tzinfo=UTC)
LINES_PER_WORKLOAD = 1440


def _lifecycle(i: int) -> list[bytes]:
    item = AllocationItem(gpu_uuid=f"GPU-{i}", units=Decimal(8), model="A100-80GB")
    placed = WorkloadPlacedV1(
        workload_id=f"wl-{i}",
        tenant_id="acme",
        placement_id=f"p-{i}",
        node="n1",
        allocations=[item],
        kind="job",
        tags={"project": "bench"},
    )
    # Charged from the host's running fact to its exit (billing's rule since the host facts).
    running = WorkloadRunningV1(
        workload_id=f"wl-{i}", tenant_id="acme", placement_id=f"p-{i}", node="n1", started_at=T0
    )
    end = T0 + timedelta(minutes=LINES_PER_WORKLOAD)
    ended = WorkloadEndedV1(
        workload_id=f"wl-{i}", tenant_id="acme", placement_id=f"p-{i}", outcome="completed", ended_at=end
    )
    return [
        encode(envelop(placed, source="bench", time=T0)),
        encode(envelop(running, source="bench", time=T0)),
        encode(envelop(ended, source="bench", time=end)),
    ]


async def _publish(bootstrap: str, topic: str, first: int, count: int) -> None:
    producer = create_producer(bootstrap=bootstrap, client_id="bench")
    await producer.start()
    try:
        futures = [
            await producer.send(topic, value=value, key=f"wl-{i}".encode())
            for i in range(first, first + count)
            for value in _lifecycle(i)
        ]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


async def _closed(pool: asyncpg.Pool, target: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while await pool.fetchval("SELECT count(*) FROM allocations WHERE status = 'closed'") < target:
        if time.monotonic() > deadline:
            raise TimeoutError(f"fewer than {target} allocations closed after {timeout}s")
        await asyncio.sleep(0.1)


async def _backend_cpu_s(pool: asyncpg.Pool, application_name: str) -> dict[int, float]:
    """CPU seconds used so far by each Postgres backend of the pool (empty when /proc cannot show them)."""
    rows = await pool.fetch("SELECT pid FROM pg_stat_activity WHERE application_name = $1", application_name)
    return _proc_cpu_s([row["pid"] for row in rows])


def _proc_cpu_s(pids: list[int]) -> dict[int, float]:
    used: dict[int, float] = {}
    for pid in pids:
        try:
            used[pid] = cpu_seconds(pid)
        except OSError:
            continue
    return used


async def ingest(env: BenchEnv, bootstrap: str, workloads: int) -> None:
    from services.billing.app import create_app
    from services.billing.settings import BillingSettings

    settings = BillingSettings(
        kafka_bootstrap_servers=bootstrap,
        kafka_topic_prefix=env.topic_prefix,
        database_url=env.database_url,
        db_schema=env.schema("billing"),
        redis_url=env.redis_url,
        redis_prefix=f"bench:{env.token}:",
        log_json=False,
        accrual_interval_s=3600,
    )
    app = create_app(settings)
    topic = env.topic_prefix + topics.SCHEDULER
    async with app.router.lifespan_context(app):
        pool = app.state.runtime.pool
        await _publish(bootstrap, topic, 0, 1)  # warm-up: group join, connections, prices
        await _closed(pool, 1, 120)
        log(f"ingest: {workloads} workloads x {LINES_PER_WORKLOAD} lines")
        application_name = f"gpucloud-{settings.pg_schema}"
        db_before = await _backend_cpu_s(pool, application_name)
        started, cpu_started = time.monotonic(), time.process_time()
        await _publish(bootstrap, topic, 1, workloads)
        await _closed(pool, 1 + workloads, 300)
        elapsed, cpu = time.monotonic() - started, time.process_time() - cpu_started
        db_after = await _backend_cpu_s(pool, application_name)
        postings = await pool.fetchval("SELECT count(*) FROM postings") - 2 * LINES_PER_WORKLOAD
        emit(
            "billing.ledger", "postings_per_s", postings / elapsed, "1/s", postings=postings, seconds=elapsed
        )
        emit("billing.ledger", "postings_per_s_vs_target", postings / elapsed / 10_000, "ratio")
        emit("billing.ledger", "cpu_us_per_posting", cpu / postings * 1e6, "us", cpu_s=cpu)
        if db_after:
            db_cpu = sum(used - db_before.get(pid, 0.0) for pid, used in db_after.items())
            emit("billing.ledger", "db_cpu_us_per_posting", db_cpu / postings * 1e6, "us", cpu_s=db_cpu)
        await pool.execute(f'DROP SCHEMA "{settings.pg_schema}" CASCADE')


async def load_rows(env: BenchEnv, schema: str, rows: int) -> None:
    await migrate(dsn=env.database_url, schema=schema, migrations=service_migrations("billing"))
    conn = await asyncpg.connect(env.database_url, server_settings={"search_path": schema})
    try:
        step = 50_000
        for first in range(0, rows // 2, step):
            entries, postings = _batch(first, min(step, rows // 2 - first))
            await conn.copy_records_to_table("journal_entries", records=entries, columns=ENTRY_COLUMNS)
            await conn.copy_records_to_table("postings", records=postings, columns=POSTING_COLUMNS)
        await conn.execute("ANALYZE journal_entries; ANALYZE postings")
    finally:
        await conn.close()


ENTRY_COLUMNS = [
    "entry_id",
    "source_event_id",
    "at",
    "tenant_id",
    "project",
    "description",
    "allocation_id",
    "workload_id",
    "resource",
    "pricing_class",
    "period_start",
    "period_end",
    "basis",
    "quantity_hours",
    "compute_unit_hours",
    "price_id",
    "micro_per_hour",
    "amount_micro",
]
POSTING_COLUMNS = ["entry_id", "account", "debit_micro", "credit_micro", "tenant_id", "project", "at"]


def _batch(first: int, count: int) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    entries, postings = [], []
    for n in range(first, first + count):
        start = T0 + timedelta(minutes=n)
        key = f"a-{n // 1440}|{start.isoformat()}"
        entry_id = f"charge:{key}"
        amount = 66_667
        entries.append(
            (
                entry_id,
                key,
                start + timedelta(minutes=1),
                "acme",
                "bench",
                "A100-80GB on_demand 0.133333333 h",
                f"a-{n // 1440}",
                f"wl-{n // 1440}",
                "A100-80GB",
                "on_demand",
                start,
                start + timedelta(minutes=1),
                "compute_unit_hour",
                Decimal("0.133333333"),
                Decimal("0.133333333"),
                "seed",
                500_000,
                amount,
            )
        )
        at = start + timedelta(minutes=1)
        postings.append((entry_id, "tenant:acme:project:bench", amount, 0, "acme", "bench", at))
        postings.append((entry_id, "revenue:on_demand", 0, amount, "acme", "bench", at))
    return entries, postings


async def export_child(database_url: str, schema: str, fmt: str) -> None:
    from services.billing.adapters.export_queries import ExportRequest, export_chunks, export_totals

    conn = await asyncpg.connect(database_url, server_settings={"search_path": schema})
    request = ExportRequest(
        tenant_id="acme",
        project="bench",
        start=T0,
        end=T0 + timedelta(days=3650),
        format=fmt,  # type: ignore[arg-type]
    )
    started = time.monotonic()
    size = 0
    async with conn.transaction(isolation="repeatable_read", readonly=True):
        totals = await export_totals(conn, request)
        async for piece in export_chunks(conn, request):
            size += len(piece)
    elapsed = time.monotonic() - started
    await conn.close()
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": elapsed, "peak_mb": peak_mb, "rows": totals.rows, "bytes": size}))


def export(env: BenchEnv, schema: str, fmt: str) -> None:
    out = subprocess.run(
        [sys.executable, __file__, "--export-child", schema, "--formats", fmt],
        check=True,
        capture_output=True,
        text=True,
        env={"DATABASE_URL": env.database_url},
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    extra = {"rows": result["rows"], "format": fmt, "bytes": result["bytes"]}
    emit("billing.export", "seconds", result["seconds"], "s", **extra)
    emit("billing.export", "seconds_vs_target", result["seconds"] / 10, "ratio", format=fmt)
    emit("billing.export", "peak_memory_mb", result["peak_mb"], "MB", **extra)
    emit("billing.export", "peak_memory_mb_vs_target", result["peak_mb"] / 300, "ratio", format=fmt)


async def _drop(env: BenchEnv, schema: str) -> None:
    conn = await asyncpg.connect(env.database_url)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workloads", type=int, default=20)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--formats", default="csv,parquet")
    parser.add_argument("--export-child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    env = BenchEnv.create()
    if args.export_child:
        asyncio.run(export_child(env.database_url, args.export_child, args.formats))
        return
    with EmbeddedBroker() as broker:
        asyncio.run(ingest(env, broker.bootstrap, args.workloads))
    schema = env.schema("billing_export")
    try:
        log(f"export: loading {args.rows} postings with COPY")
        asyncio.run(load_rows(env, schema, args.rows))
        for fmt in args.formats.split(","):
            export(env, schema, fmt)
    finally:
        asyncio.run(_drop(env, schema))


if __name__ == "__main__":
    main()
