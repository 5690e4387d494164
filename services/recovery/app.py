"""Composition root of the recovery service: settings, runtime, consumers and routers."""

from __future__ import annotations

from fastapi import FastAPI

from libs.common.db import service_migrations
from libs.common.http import create_service_app
from libs.common.runtime import ServiceRuntime
from services.recovery.settings import RecoverySettings

__all__ = ["create_app"]


def create_app(settings: RecoverySettings | None = None) -> FastAPI:
    """Build the recovery app; nothing connects until the app's lifespan starts."""
    settings = settings or RecoverySettings()
    runtime = ServiceRuntime(settings=settings, migrations=service_migrations("recovery"))
    return create_service_app(
        runtime=runtime,
        title="gpucloud recovery",
        description=(
            "Fault classification, root-cause hints, automatic drain and migration, and "
            "recovery SLO statistics."
        ),
    )
