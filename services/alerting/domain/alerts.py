"""The alert as the outside world sees it: labels, annotations, start/end and a stable fingerprint."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from enum import StrEnum

from pydantic import AwareDatetime, BaseModel, ConfigDict

from services.alerting.domain.rules import Rule

__all__ = ["Alert", "AlertStatus", "alert_labels", "fingerprint"]


class AlertStatus(StrEnum):
    """Alertmanager's two outward states."""

    FIRING = "firing"
    RESOLVED = "resolved"


def fingerprint(labels: Mapping[str, str]) -> str:
    """Stable 16-hex-digit identity of a label set (order-independent), like Alertmanager's."""
    canonical = json.dumps(sorted(labels.items()), separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def alert_labels(rule: Rule, series: Mapping[str, str]) -> dict[str, str]:
    """Series labels plus the rule's labels (severity among them) and alertname; the rule's win."""
    return {**series, **rule.all_labels(), "alertname": rule.name}


class Alert(BaseModel):
    """A firing or resolved alert handed to routing; `ends_at` is set once resolved."""

    model_config = ConfigDict(frozen=True)

    fingerprint: str
    labels: dict[str, str]
    annotations: dict[str, str]
    starts_at: AwareDatetime
    ends_at: AwareDatetime | None = None
    value: float | None = None

    @property
    def status(self) -> AlertStatus:
        """Resolved once it has an end."""
        return AlertStatus.FIRING if self.ends_at is None else AlertStatus.RESOLVED
