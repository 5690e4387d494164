"""Composition root of the inventory service: settings, runtime, consumers, fleet file and routers."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import UTC, datetime

from fastapi import FastAPI

from libs.common.db import service_migrations
from libs.common.events import topics
from libs.common.http import create_service_app
from libs.common.runtime import BackgroundTask, ConsumerSpec, ServiceRuntime
from services.inventory.adapters.catalog_yaml import load_catalog
from services.inventory.adapters.fleet_yaml import parse_fleet
from services.inventory.api import admin, read
from services.inventory.domain.records import NodeDiscovery
from services.inventory.domain.units import UnitBasis
from services.inventory.service.handlers import InventoryDeps, handlers
from services.inventory.service.operations import UnitContext, register
from services.inventory.service.unit_of_work import inventory_uow
from services.inventory.settings import InventorySettings

__all__ = ["create_app"]

log = logging.getLogger(__name__)


def _fleet_loader(discoveries: Sequence[NodeDiscovery], units: UnitContext) -> BackgroundTask:
    async def load(runtime: ServiceRuntime, stop: asyncio.Event) -> None:
        async with inventory_uow(runtime) as uow:
            result = await register(
                uow=uow, discoveries=discoveries, units=units, at=datetime.now(UTC), source="fleet-file"
            )
            await uow.commit()
        log.info(
            "fleet file: %d GPUs on %d nodes, %d changed", result.gpus, result.nodes, result.gpus_changed
        )

    return load


def create_app(settings: InventorySettings | None = None) -> FastAPI:
    """Build the inventory app; nothing connects until the app's lifespan starts.

    The fleet file (INVENTORY_FLEET_FILE) is parsed here, so a broken file stops the service at
    start instead of crash-looping in the background.
    """
    settings = settings or InventorySettings()
    catalog = load_catalog()
    basis = UnitBasis(
        reference_model=catalog.get(settings.unit_reference_model).name,
        units_per_reference=settings.units_per_reference,
    )
    units = UnitContext(catalog=catalog, basis=basis)
    background: list[tuple[str, BackgroundTask]] = []
    if settings.fleet_file is not None:
        text = settings.fleet_file.read_text(encoding="utf-8")
        background.append(("fleet-file", _fleet_loader(parse_fleet(text=text, catalog=catalog), units)))
    consumer = ConsumerSpec(
        "main", (topics.NODE_AGENT, topics.SCHEDULER, topics.RECOVERY), handlers(InventoryDeps(units=units))
    )
    runtime = ServiceRuntime(
        settings=settings,
        migrations=service_migrations("inventory"),
        consumers=[consumer],
        background=background,
    )
    app = create_service_app(
        runtime=runtime,
        title="gpucloud inventory",
        description=(
            "The GPU pool as users see it: nodes, GPUs, MIG and time-sliced partitions, "
            "compute units, health and capacity."
        ),
        routers=[read.router, admin.router],
        larger_bodies={admin.FLEET_PATH: settings.max_fleet_request_bytes},
    )
    app.state.units = units
    return app
