"""Composition root of the telemetry service: settings, runtime, consumers and routers."""

from __future__ import annotations

from fastapi import FastAPI

from libs.common.db import service_migrations
from libs.common.http import create_service_app
from libs.common.runtime import ServiceRuntime
from services.telemetry.settings import TelemetrySettings

__all__ = ["create_app"]


def create_app(settings: TelemetrySettings | None = None) -> FastAPI:
    """Build the telemetry app; nothing connects until the app's lifespan starts."""
    settings = settings or TelemetrySettings()
    runtime = ServiceRuntime(settings=settings, migrations=service_migrations("telemetry"))
    return create_service_app(
        runtime=runtime,
        title="gpucloud telemetry",
        description=(
            "Per-second GPU metrics from NVML or the simulated fleet: live state, "
            "rollups, Prometheus exposition and fault signals."
        ),
    )
