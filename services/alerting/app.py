"""Composition root of the alerting service: settings, runtime, consumers and routers."""

from __future__ import annotations

from fastapi import FastAPI

from libs.common.db import service_migrations
from libs.common.http import create_service_app
from libs.common.runtime import ServiceRuntime
from services.alerting.settings import AlertingSettings

__all__ = ["create_app"]


def create_app(settings: AlertingSettings | None = None) -> FastAPI:
    """Build the alerting app; nothing connects until the app's lifespan starts."""
    settings = settings or AlertingSettings()
    runtime = ServiceRuntime(settings=settings, migrations=service_migrations("alerting"))
    return create_service_app(
        runtime=runtime,
        title="gpucloud alerting",
        description=(
            "Threshold-for-duration rules on the live stream and pager webhooks that "
            "are never lost or duplicated."
        ),
    )
