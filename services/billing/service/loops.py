"""Background loops: accrual of open allocations, the fair-share feed, and daily per-project exports."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Protocol

from libs.common.events.billing import UsageDecayedV1
from libs.common.runtime import BackgroundTask, ServiceRuntime
from libs.common.stopping import sleep_or_stop
from services.billing.adapters.export_queries import ExportRequest, write_export_file
from services.billing.adapters.export_schedule_store import ExportScheduleStore
from services.billing.adapters.ledger_queries import decayed_usage
from services.billing.service.metering import MeteringConfig, accrue
from services.billing.service.unit_of_work import billing_uow

__all__ = [
    "LoopSettings",
    "MeteringSettings",
    "accrue_all",
    "background_tasks",
    "publish_decayed_usage",
    "run_daily_exports",
]

log = logging.getLogger(__name__)


class MeteringSettings(Protocol):
    """The settings metering reads (the service's settings have them)."""

    @property
    def rating_interval(self) -> timedelta: ...
    @property
    def accrual_max_span_h(self) -> float: ...
    @property
    def accrual_batch(self) -> int: ...


class LoopSettings(MeteringSettings, Protocol):
    """The settings the background loops read (the service's settings have them)."""

    @property
    def accrual_interval_s(self) -> float: ...
    @property
    def usage_half_life_h(self) -> float: ...
    @property
    def usage_publish_interval_s(self) -> float: ...
    @property
    def export_dir(self) -> str | None: ...
    @property
    def export_check_interval_s(self) -> float: ...


def metering_config(settings: MeteringSettings) -> MeteringConfig:
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
        async with billing_uow(runtime) as uow:
            rated = await accrue(uow, now=now, config=config)
            await uow.commit()
        total += rated
        if rated < config.batch:
            return total


async def publish_decayed_usage(runtime: ServiceRuntime, *, now: datetime, half_life: timedelta) -> int:
    """Emit one UsageDecayedV1 per tenant with usage; returns how many."""
    async with billing_uow(runtime) as uow:
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


async def run_daily_exports(runtime: ServiceRuntime, *, directory: Path, today: date) -> int:
    """Export every scheduled project's finished days not yet exported; returns files written."""
    written = 0
    schedules = ExportScheduleStore(runtime.pool)
    for due in await schedules.due(last_day=today - timedelta(days=1)):
        day = due.day
        start = datetime.combine(day, time(0), tzinfo=UTC)
        fmt = due.format
        request = ExportRequest(
            tenant_id=due.tenant_id,
            project=due.project,
            start=start,
            end=start + timedelta(days=1),
            format=fmt,
        )
        path = directory / request.tenant_id / request.project / f"{day.isoformat()}.{fmt}"
        totals = await write_export_file(runtime.pool, request, path)
        await schedules.record_run(due, path=str(path), totals=totals)
        written += 1
    return written


def background_tasks(settings: LoopSettings) -> list[tuple[str, BackgroundTask]]:
    """The loops the billing runtime supervises."""
    config = metering_config(settings)
    half_life = timedelta(hours=settings.usage_half_life_h)

    async def accrual(runtime: ServiceRuntime, stop: asyncio.Event) -> None:
        while not await sleep_or_stop(stop, settings.accrual_interval_s):
            await accrue_all(runtime, now=datetime.now(UTC), config=config)

    async def fair_share(runtime: ServiceRuntime, stop: asyncio.Event) -> None:
        while not await sleep_or_stop(stop, settings.usage_publish_interval_s):
            await publish_decayed_usage(runtime, now=datetime.now(UTC), half_life=half_life)

    async def exports(runtime: ServiceRuntime, stop: asyncio.Event) -> None:
        assert settings.export_dir is not None
        while True:  # first run at start-up: a restarted service catches up on missed days at once
            await run_daily_exports(
                runtime, directory=Path(settings.export_dir), today=datetime.now(UTC).date()
            )
            if await sleep_or_stop(stop, settings.export_check_interval_s):
                return

    tasks: list[tuple[str, BackgroundTask]] = [("accrual", accrual), ("fair-share", fair_share)]
    if settings.export_dir:
        tasks.append(("daily-exports", exports))
    return tasks
