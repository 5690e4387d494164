"""Composition root of the alerting service: settings, runtime, consumers, loops and routers."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import FastAPI

from libs.common.db import service_migrations
from libs.common.events import topics
from libs.common.http import create_service_app
from libs.common.runtime import ConsumerSpec, ServiceRuntime
from services.alerting.api import alertmanager_v2 as api_alertmanager_v2
from services.alerting.api import alerts as api_alerts
from services.alerting.api import delivery as api_delivery
from services.alerting.api import inhibit_rules as api_inhibit_rules
from services.alerting.api import rules as api_rules
from services.alerting.service.delivery_worker import DeliveryWorker
from services.alerting.service.evaluator import Evaluator
from services.alerting.service.handlers import handlers
from services.alerting.settings import AlertingSettings

__all__ = ["create_app"]


def create_app(settings: AlertingSettings | None = None) -> FastAPI:
    """Build the alerting app; nothing connects until the app's lifespan starts."""
    settings = settings or AlertingSettings()
    delivery = DeliveryWorker(settings=settings)
    evaluator = Evaluator(settings=settings, on_notified=delivery.hand_over)
    runtime = ServiceRuntime(
        settings=settings,
        migrations=service_migrations("alerting"),
        consumers=[
            ConsumerSpec(
                "signals",
                (topics.TELEMETRY_FAULTS, topics.BILLING, topics.RECOVERY),
                handlers(),
            )
        ],
        background=[("evaluator", evaluator.run), ("delivery", delivery.run)],
    )
    app = create_service_app(
        runtime=runtime,
        title="gpucloud alerting",
        description=(
            "Threshold-for-duration rules on the live stream and pager webhooks that "
            "are never lost or duplicated."
        ),
        routers=[
            api_rules.router,
            api_alerts.router,
            api_delivery.router,
            api_inhibit_rules.router,
            api_alertmanager_v2.router,
        ],
    )
    app.state.delivery = delivery
    app.state.evaluator = evaluator
    app.state.started_at = datetime.now(UTC)
    return app
