"""Composition root of the scheduler service: settings, runtime, consumers, the placer and routers."""

from __future__ import annotations

from fastapi import FastAPI

from libs.common.db import service_migrations
from libs.common.events import topics
from libs.common.http import create_service_app
from libs.common.objectstore import ObjectStoreError, open_store
from libs.common.runtime import ConsumerSpec, ServiceRuntime
from services.scheduler.adapters.catalog_loader import load_catalog, load_gpu_models
from services.scheduler.adapters.quota_store import QuotaStore
from services.scheduler.adapters.task_reads import TaskReads
from services.scheduler.api import (
    admin,
    advice,
    arrays,
    describe,
    drafts,
    results,
    tasks,
    tenants,
    whoami,
    workloads,
)
from services.scheduler.service.context import SchedulerContext
from services.scheduler.service.handlers import SchedulerDeps, handlers
from services.scheduler.service.placer import Placer
from services.scheduler.service.retention import retention_sweeper
from services.scheduler.service.submission import hold_submission_pool
from services.scheduler.service.tasks import EndWatch
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
    objects = open_store(settings.object_store_url)
    sweeper = retention_sweeper(
        objects,
        leading=lambda: ctx.is_leader,
        every_s=settings.retention_sweep_s,
        log_retention_s=settings.log_retention_s,
        output_retention_s=settings.output_retention_s,
    )
    runtime.background.append(("retention", sweeper))
    app = create_service_app(
        runtime=runtime,
        title="gpucloud scheduler",
        # Drafts before workloads, so /v1/workloads/drafts is never read as a workload id (and describe,
        # with /v1/queue/preview, before both).
        routers=[
            tenants.router,
            describe.router,
            drafts.router,
            workloads.router,
            arrays.router,
            results.router,
            tasks.router,
            admin.router,
            advice.router,
            whoami.router,
        ],
        description=(
            "Multi-tenant queue with dynamic priority, fair share, a reserved pool, "
            "quotas, gang placement and preemption."
        ),
        larger_bodies={arrays.ARRAYS_PATH: settings.max_array_request_bytes},
    )
    app.state.scheduler = ctx
    app.state.objects = objects
    app.state.end_watch = EndWatch(ended=lambda ids: TaskReads(runtime.pool).ended(ids))
    app.add_exception_handler(ObjectStoreError, results.on_store_error)
    return app
