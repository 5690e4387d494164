"""Alert state changes for the other services (recovery, console)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from libs.common.events import topics
from libs.common.events.base import Event

TOPIC = topics.ALERTING


class _AlertEvent(Event):
    fingerprint: str = Field(description="Stable id of the alert (rule + labels).")
    rule: str = Field(description="Rule name.")
    severity: str = Field(description="critical, warning or info.")
    labels: dict[str, str] = Field(default_factory=dict, description="Series labels.")
    tenant_id: str | None = Field(default=None, description="Tenant scope, if any.")

    def subject(self) -> str:
        return self.fingerprint


class AlertFiredV1(_AlertEvent):
    """An alert started firing."""

    type: Literal["alerting.alert.fired.v1"] = "alerting.alert.fired.v1"
    starts_at: datetime = Field(description="When the condition began to hold.")
    value: float | None = Field(default=None, description="Value that crossed the threshold.")
    summary: str = Field(default="", description="Human summary.")


class AlertResolvedV1(_AlertEvent):
    """A firing alert resolved."""

    type: Literal["alerting.alert.resolved.v1"] = "alerting.alert.resolved.v1"
    ends_at: datetime = Field(description="When it resolved.")


EVENTS: tuple[type[Event], ...] = (AlertFiredV1, AlertResolvedV1)
