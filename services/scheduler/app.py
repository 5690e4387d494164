"""Composition root of the scheduler service: settings, runtime, consumers, the placer and routers."""

from __future__ import annotations

from fastapi import FastAPI

from libs.common.db import service_migrations
from libs.common.events import topics
from libs.common.http import create_service_app
from libs.common.runtime import ConsumerSpec, ServiceRuntime
from services.scheduler.adapters.catalog_loader import load_catalog, load_gpu_models
from services.scheduler.adapters.quota_store import QuotaStore
from services.scheduler.api import admin, advice, drafts, tenants, workloads
from services.scheduler.service.context import SchedulerContext
from services.scheduler.service.handlers import SchedulerDeps, handlers
from services.scheduler.service.placer import Placer
from services.scheduler.service.submission import hold_submission_pool
from services.scheduler.settings import SchedulerSettings

__all__ = ["create_app"]

_CONSUMED = (topics.INVENTORY, topics.NODE_AGENT, topics.RECOVERY, topics.BILLING)


def create_app(settings: SchedulerSettings | None = None, *, quotas: QuotaStore | None = None) -> FastAPI:
    """Build the scheduler app; nothing connects until the app's lifespan starts."""
    settings = settings or SchedulerSettings()
    runtime = ServiceRuntime(settings=settings, migrations=service_migrations("scheduler"))
    ctx = SchedulerContext(
        settings=settings,
        runtime=runtime,
        catalog=load_catalog(file=settings.image_catalog_file, references=settings.image_references),
        models=load_gpu_models(),
        quota_override=quotas,
    )
    deps = SchedulerDeps(half_life=ctx.half_life)
    runtime.consumers = [ConsumerSpec("main", _CONSUMED, handlers(deps))]
    runtime.background = [("placer", Placer(ctx)), ("submission-pool", hold_submission_pool(ctx))]
    app = create_service_app(
        runtime=runtime,
        title="gpucloud scheduler",
        # Drafts before workloads, so /v1/workloads/drafts is never read as a workload id.
        routers=[tenants.router, drafts.router, workloads.router, admin.router, advice.router],
        description=(
            "Multi-tenant queue with dynamic priority, fair share, a reserved pool, "
            "quotas, gang placement and preemption."
        ),
    )
    app.state.scheduler = ctx
    return app
