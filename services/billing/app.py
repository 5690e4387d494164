"""Composition root of the billing service: settings, runtime, consumers, loops and routers."""

from __future__ import annotations

from fastapi import FastAPI

from libs.common.db import service_migrations
from libs.common.events import topics
from libs.common.http import create_service_app
from libs.common.runtime import ConsumerSpec, ServiceRuntime
from services.billing.api import ROUTERS
from services.billing.service.handlers import BillingDeps, handlers
from services.billing.service.loops import background_tasks, metering_config
from services.billing.settings import BillingSettings

__all__ = ["create_app"]


def create_app(settings: BillingSettings | None = None) -> FastAPI:
    """Build the billing app; nothing connects until the app's lifespan starts."""
    settings = settings or BillingSettings()
    deps = BillingDeps(metering=metering_config(settings), idle=settings.idle_policy, sla=settings.sla_policy)
    runtime = ServiceRuntime(
        settings=settings,
        migrations=service_migrations("billing"),
        # The node agent's topic too: the hosts' own running and exit facts, which reconciliation checks
        # the ledger against, read without the scheduler in between; and recovery's, whose incidents turn
        # the time a platform fault cost into SLA credits.
        consumers=[
            ConsumerSpec(
                "main",
                (topics.SCHEDULER, topics.NODE_AGENT, topics.TELEMETRY_ROLLUPS, topics.RECOVERY),
                handlers(deps),
            )
        ],
        background=background_tasks(settings),
    )
    return create_service_app(
        runtime=runtime,
        title="gpucloud billing",
        description=(
            "Metering, an append-only double-entry ledger, tags, per-project exports, "
            "budgets, idle reclaim and spot advice."
        ),
        routers=list(ROUTERS),
    )
