"""Composition root of the inventory service: settings, runtime, consumers and routers."""

from __future__ import annotations

from fastapi import FastAPI

from libs.common.db import service_migrations
from libs.common.http import create_service_app
from libs.common.runtime import ServiceRuntime
from services.inventory.settings import InventorySettings

__all__ = ["create_app"]


def create_app(settings: InventorySettings | None = None) -> FastAPI:
    """Build the inventory app; nothing connects until the app's lifespan starts."""
    settings = settings or InventorySettings()
    runtime = ServiceRuntime(settings=settings, migrations=service_migrations("inventory"))
    return create_service_app(
        runtime=runtime,
        title="gpucloud inventory",
        description=(
            "The GPU pool as users see it: nodes, GPUs, MIG and time-sliced partitions, "
            "compute units, health and capacity."
        ),
    )
