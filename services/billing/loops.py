"""Background loops: accrual of open allocations, the fair-share feed, and daily per-project exports."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any

import asyncpg

from libs.common.events.billing import UsageDecayedV1
from libs.common.runtime import BackgroundTask, ServiceRuntime
from services.billing.export_stream import ExportFormat, ExportRequest, export_chunks, export_totals
from services.billing.exports import ExportTotals
from services.billing.metering import MeteringConfig, accrue
from services.billing.settings import BillingSettings
from services.billing.views import decayed_usage

__all__ = [
    "accrue_all",
    "background_tasks",
    "publish_decayed_usage",
    "run_daily_exports",
    "write_export_file",
]

log = logging.getLogger(__name__)

DUE_EXPORTS = """
SELECT s.tenant_id, s.project, s.format, d::date AS day
FROM export_schedules s, generate_series(s.first_day, $1::date, interval '1 day') AS d
WHERE NOT EXISTS (SELECT 1 FROM export_runs r WHERE r.tenant_id = s.tenant_id AND r.project = s.project
                  AND r.format = s.format AND r.day = d::date)
ORDER BY 4, 1, 2, 3 LIMIT 100
"""
RECORD_RUN = """
INSERT INTO export_runs (tenant_id, project, format, day, path, rows, debit_micro, credit_micro)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING
"""


def metering_config(settings: BillingSettings) -> MeteringConfig:
    """The metering configuration the settings describe."""
    return MeteringConfig(
        interval=settings.rating_interval,
        max_span=timedelta(hours=settings.accrual_max_span_h),
        batch=settings.accrual_batch,
    )


async def accrue_all(runtime: ServiceRuntime, *, now: datetime, config: MeteringConfig) -> int:
    """Rate every open allocation up to `now`, one batch per transaction; returns allocations rated."""
    total = 0
    while True:
        async with runtime.uow() as uow:
            rated = await accrue(uow, now=now, config=config)
            await uow.commit()
        total += rated
        if rated < config.batch:
            return total


async def publish_decayed_usage(runtime: ServiceRuntime, *, now: datetime, half_life: timedelta) -> int:
    """Emit one UsageDecayedV1 per tenant with usage; returns how many."""
    async with runtime.uow() as uow:
        usage = await decayed_usage(uow.conn, now=now, half_life=half_life, tenant_id=None)
        for tenant_id, value in usage.items():
            event = UsageDecayedV1(
                tenant_id=tenant_id,
                decayed_unit_hours=value,
                half_life_hours=half_life.total_seconds() / 3600,
            )
            await uow.emit(event, tenant=tenant_id)
        await uow.commit()
    return len(usage)


async def write_export_file(pool: asyncpg.Pool[Any], request: ExportRequest, path: Path) -> ExportTotals:
    """Write one export to `path` atomically (temporary name, then rename) and return its totals."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    async with pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
        totals = await export_totals(conn, request)
        with partial.open("wb") as out:
            async for piece in export_chunks(conn, request):
                out.write(piece)
    os.replace(partial, path)
    return totals


async def run_daily_exports(runtime: ServiceRuntime, *, directory: Path, today: date) -> int:
    """Export every scheduled project's finished days not yet exported; returns files written."""
    written = 0
    for due in await runtime.pool.fetch(DUE_EXPORTS, today - timedelta(days=1)):
        day: date = due["day"]
        start = datetime.combine(day, time(0), tzinfo=UTC)
        fmt: ExportFormat = due["format"]
        request = ExportRequest(
            tenant_id=due["tenant_id"],
            project=due["project"],
            start=start,
            end=start + timedelta(days=1),
            format=fmt,
        )
        path = directory / request.tenant_id / request.project / f"{day.isoformat()}.{fmt}"
        totals = await write_export_file(runtime.pool, request, path)
        await runtime.pool.execute(
            RECORD_RUN,
            request.tenant_id,
            request.project,
            fmt,
            day,
            str(path),
            totals.rows,
            totals.debit_micro,
            totals.credit_micro,
        )
        written += 1
    return written


def background_tasks(settings: BillingSettings) -> list[tuple[str, BackgroundTask]]:
    """The loops the billing runtime supervises."""
    config = metering_config(settings)
    half_life = timedelta(hours=settings.usage_half_life_h)

    async def accrual(runtime: ServiceRuntime, stop: asyncio.Event) -> None:
        while not await _sleep(stop, settings.accrual_interval_s):
            await accrue_all(runtime, now=datetime.now(UTC), config=config)

    async def fair_share(runtime: ServiceRuntime, stop: asyncio.Event) -> None:
        while not await _sleep(stop, settings.usage_publish_interval_s):
            await publish_decayed_usage(runtime, now=datetime.now(UTC), half_life=half_life)

    async def exports(runtime: ServiceRuntime, stop: asyncio.Event) -> None:
        assert settings.export_dir is not None
        while True:  # first run at start-up: a restarted service catches up on missed days at once
            await run_daily_exports(
                runtime, directory=Path(settings.export_dir), today=datetime.now(UTC).date()
            )
            if await _sleep(stop, settings.export_check_interval_s):
                return

    tasks: list[tuple[str, BackgroundTask]] = [("accrual", accrual), ("fair-share", fair_share)]
    if settings.export_dir:
        tasks.append(("daily-exports", exports))
    return tasks


async def _sleep(stop: asyncio.Event, seconds: float) -> bool:
    """Wait `seconds` or until stop; True when stopping."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)
    return stop.is_set()
