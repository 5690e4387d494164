"""Composition root of the billing service: settings, runtime, consumers and routers."""

from __future__ import annotations

from fastapi import FastAPI

from libs.common.db import service_migrations
from libs.common.http import create_service_app
from libs.common.runtime import ServiceRuntime
from services.billing.settings import BillingSettings

__all__ = ["create_app"]


def create_app(settings: BillingSettings | None = None) -> FastAPI:
    """Build the billing app; nothing connects until the app's lifespan starts."""
    settings = settings or BillingSettings()
    runtime = ServiceRuntime(settings=settings, migrations=service_migrations("billing"))
    return create_service_app(
        runtime=runtime,
        title="gpucloud billing",
        description=(
            "Metering, an append-only double-entry ledger, tags, per-project exports, "
            "budgets, idle reclaim and spot advice."
        ),
    )
