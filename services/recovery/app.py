"""Composition root of the recovery service: settings, runtime, consumers and routers."""

from __future__ import annotations

from fastapi import FastAPI

from libs.common.db import service_migrations
from libs.common.events import topics
from libs.common.http import create_service_app
from libs.common.runtime import BackgroundTask, ConsumerSpec, ServiceRuntime
from services.recovery import api
from services.recovery.catalog import load_catalog
from services.recovery.handlers import RecoveryHandlers
from services.recovery.loops import samples_loop, tick_loop
from services.recovery.settings import RecoverySettings
from services.recovery.window import SampleWindow

__all__ = ["create_app"]

CONSUMED = (
    topics.TELEMETRY_FAULTS,
    topics.ALERTING,
    topics.INVENTORY,
    topics.SCHEDULER,
    topics.NODE_AGENT,
)


def create_app(settings: RecoverySettings | None = None) -> FastAPI:
    """Build the recovery app; nothing connects until the app's lifespan starts."""
    settings = settings or RecoverySettings()
    catalog = load_catalog()
    background: list[tuple[str, BackgroundTask]] = [("recovery-tick", tick_loop())]
    if settings.consume_samples:
        background.append(("recovery-samples", samples_loop))
    runtime = ServiceRuntime(
        settings=settings, migrations=service_migrations("recovery"), background=background
    )
    window = (
        SampleWindow(redis=lambda: runtime.redis, keys=runtime.keys, window_s=settings.window_s)
        if settings.consume_samples
        else None
    )
    handlers = RecoveryHandlers(settings=settings, catalog=catalog, window=window)
    runtime.consumers = [ConsumerSpec("main", CONSUMED, handlers.mapping())]
    app = create_service_app(
        runtime=runtime,
        title="gpucloud recovery",
        description=(
            "Fault classification, root-cause hints, automatic drain and migration, and "
            "recovery SLO statistics."
        ),
        routers=[api.router],
    )
    app.state.catalog = catalog
    app.state.recovery_settings = settings
    return app
