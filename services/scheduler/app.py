"""Composition root of the scheduler service: settings, runtime, consumers and routers."""

from __future__ import annotations

from fastapi import FastAPI

from libs.common.auth.api import router as tenants_router
from libs.common.db import service_migrations
from libs.common.http import create_service_app
from libs.common.runtime import ServiceRuntime
from services.scheduler.settings import SchedulerSettings

__all__ = ["create_app"]


def create_app(settings: SchedulerSettings | None = None) -> FastAPI:
    """Build the scheduler app; nothing connects until the app's lifespan starts."""
    settings = settings or SchedulerSettings()
    runtime = ServiceRuntime(settings=settings, migrations=service_migrations("scheduler"))
    return create_service_app(
        runtime=runtime,
        title="gpucloud scheduler",
        routers=[tenants_router],
        description=(
            "Multi-tenant queue with dynamic priority, fair share, a reserved pool, "
            "quotas, gang placement and preemption."
        ),
    )
