"""Composition root of the telemetry aggregator: settings, runtime, consumers, loops and routers."""

from __future__ import annotations

import asyncio

from fastapi import FastAPI

from libs.common.bus.generations import keep_generations
from libs.common.db import service_migrations
from libs.common.events import topics
from libs.common.http import create_service_app
from libs.common.runtime import ConsumerSpec, ServiceRuntime
from services.telemetry.api import gpus, sim, stream
from services.telemetry.service.handlers import handlers
from services.telemetry.service.ingest import ingest_loop
from services.telemetry.service.loops import allocation_loop, rollup_loop
from services.telemetry.service.state import TelemetryState
from services.telemetry.settings import TelemetrySettings

__all__ = ["create_app"]


async def sample_generations(runtime: ServiceRuntime, stop: asyncio.Event) -> None:
    """The samples' owner creates their generations ahead and deletes those read (bus/generations.py)."""
    await keep_generations(runtime.settings, topics.TELEMETRY_SAMPLES, stop)


def create_app(settings: TelemetrySettings | None = None) -> FastAPI:
    """Build the telemetry app; nothing connects until the app's lifespan starts."""
    settings = settings or TelemetrySettings()
    state = TelemetryState(settings=settings)
    runtime = ServiceRuntime(
        settings=settings,
        migrations=service_migrations("telemetry"),
        consumers=[ConsumerSpec("allocations", (topics.SCHEDULER,), handlers())],
        background=[
            ("samples", ingest_loop(state)),
            ("rollups", rollup_loop(state)),
            ("allocation-labels", allocation_loop(state)),
            ("sample-generations", sample_generations),
        ],
    )
    app = create_service_app(
        runtime=runtime,
        title="gpucloud telemetry",
        description=(
            "Per-second GPU metrics from NVML or the simulated fleet: live state, "
            "rollups, Prometheus exposition, a live stream, hints and fault signals."
        ),
        routers=[gpus.router, stream.router, sim.router],
    )
    app.state.telemetry = state
    return app
