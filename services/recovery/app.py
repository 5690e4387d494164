"""Composition root of the recovery service: settings, runtime, consumers and routers."""

from __future__ import annotations

import logging

from fastapi import FastAPI

from libs.common.db import service_migrations
from libs.common.events import topics
from libs.common.http import create_service_app
from libs.common.runtime import BackgroundTask, ConsumerSpec, ServiceRuntime
from services.recovery.adapters.catalog_loader import load_catalog
from services.recovery.adapters.sample_window import SampleWindow
from services.recovery.api import catalog, incidents, slo
from services.recovery.service.handlers import RecoveryDeps, handlers
from services.recovery.service.loops import samples_loop, tick_loop
from services.recovery.settings import RecoverySettings

__all__ = ["create_app"]

log = logging.getLogger(__name__)

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
    fault_catalog = load_catalog()
    runtime = ServiceRuntime(settings=settings, migrations=service_migrations("recovery"))
    window = (
        SampleWindow(redis=lambda: runtime.redis, keys=runtime.keys, window_s=settings.window_s)
        if settings.consume_samples
        else None
    )
    # The tick's health checks read the same window diagnosis reads.
    background: list[tuple[str, BackgroundTask]] = [("recovery-tick", tick_loop(window=window))]
    if settings.consume_samples:
        background.append(("recovery-samples", samples_loop))
    else:
        log.warning("RECOVERY_CONSUME_SAMPLES is off: health checks pass on the settle period, not readings")
    runtime.background = background
    deps = RecoveryDeps(settings=settings, catalog=fault_catalog, window=window)
    runtime.consumers = [ConsumerSpec("main", CONSUMED, handlers(deps))]
    app = create_service_app(
        runtime=runtime,
        title="gpucloud recovery",
        description=(
            "Fault classification, root-cause hints, automatic drain and migration, and "
            "recovery SLO statistics."
        ),
        routers=[incidents.router, slo.router, catalog.router],
    )
    app.state.catalog = fault_catalog
    app.state.recovery_settings = settings
    return app
