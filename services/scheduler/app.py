"""Composition root of the scheduler service: settings, runtime, consumers, the placer and routers."""

from __future__ import annotations

from fastapi import FastAPI

from libs.common.auth.api import router as tenants_router
from libs.common.db import service_migrations
from libs.common.events import topics
from libs.common.http import create_service_app
from libs.common.runtime import ConsumerSpec, ServiceRuntime
from services.scheduler import api, api_admin, api_advice, api_drafts
from services.scheduler.catalog import load_default_catalog
from services.scheduler.context import SchedulerContext
from services.scheduler.handlers import make_handlers
from services.scheduler.placer import Placer
from services.scheduler.quota_store import QuotaStore
from services.scheduler.settings import SchedulerSettings
from services.scheduler.submission import hold_submission_pool

__all__ = ["create_app"]

_CONSUMED = (topics.INVENTORY, topics.NODE_AGENT, topics.RECOVERY, topics.BILLING)


def create_app(settings: SchedulerSettings | None = None, *, quotas: QuotaStore | None = None) -> FastAPI:
    """Build the scheduler app; nothing connects until the app's lifespan starts."""
    settings = settings or SchedulerSettings()
    runtime = ServiceRuntime(settings=settings, migrations=service_migrations("scheduler"))
    ctx = SchedulerContext(
        settings=settings, runtime=runtime, catalog=load_default_catalog(), quota_override=quotas
    )
    runtime.consumers = [ConsumerSpec("main", _CONSUMED, make_handlers(half_life=ctx.half_life))]
    runtime.background = [("placer", Placer(ctx)), ("submission-pool", hold_submission_pool(ctx))]
    app = create_service_app(
        runtime=runtime,
        title="gpucloud scheduler",
        # Drafts before workloads, so /v1/workloads/drafts is never read as a workload id.
        routers=[tenants_router, api_drafts.router, api.router, api_admin.router, api_advice.router],
        description=(
            "Multi-tenant queue with dynamic priority, fair share, a reserved pool, "
            "quotas, gang placement and preemption."
        ),
    )
    app.state.scheduler = ctx
    return app
