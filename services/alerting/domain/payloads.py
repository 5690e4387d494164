"""Outgoing bodies: Alertmanager webhook (version 4), PagerDuty Events API v2, Slack incoming webhook."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from services.alerting.domain.alerts import Alert, AlertStatus
from services.alerting.domain.grouping import Notification
from services.alerting.domain.templates import TemplateContext, expand

__all__ = [
    "PAGERDUTY_SEVERITY",
    "alertmanager_webhook",
    "dedup_key",
    "expanded_annotations",
    "pagerduty_event",
    "slack_message",
]

# Go's zero time: what Alertmanager writes as endsAt for an alert that has not ended.
_ZERO_TIME = "0001-01-01T00:00:00Z"
PAGERDUTY_SEVERITY = {"critical": "critical", "warning": "warning", "info": "info"}
_PD_SUMMARY_MAX = 1024
_SLACK_HEADER_MAX = 150
_SLACK_SECTION_MAX = 3000
_SLACK_ALERT_BLOCKS = 20


def _rfc3339(value: datetime | None) -> str:
    return _ZERO_TIME if value is None else value.isoformat().replace("+00:00", "Z")


def _common(maps: Iterable[Mapping[str, str]]) -> dict[str, str]:
    items = [dict(m) for m in maps]
    if not items:
        return {}
    return {k: v for k, v in items[0].items() if all(m.get(k) == v for m in items[1:])}


def expanded_annotations(
    alert: Alert, *, external_labels: Mapping[str, str] | None = None, external_url: str = ""
) -> dict[str, str]:
    """The alert's annotations with their Prometheus templates expanded on its labels and value."""
    context = TemplateContext(
        labels=alert.labels, value=alert.value, external_labels=external_labels, external_url=external_url
    )
    return {name: expand(text, context) for name, text in alert.annotations.items()}


def _webhook_alert(alert: Alert, generator_url: str, annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "status": alert.status.value,
        "labels": alert.labels,
        "annotations": annotations,
        "startsAt": _rfc3339(alert.starts_at),
        "endsAt": _rfc3339(alert.ends_at),
        "generatorURL": generator_url,
        "fingerprint": alert.fingerprint,
    }


def alertmanager_webhook(
    notification: Notification,
    *,
    external_url: str,
    max_alerts: int = 0,
    external_labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Alertmanager's webhook_config body, version "4"; max_alerts 0 means no limit, like Alertmanager."""
    alerts = notification.alerts[:max_alerts] if max_alerts else notification.alerts
    generator = f"{external_url.rstrip('/')}/alerts"
    annotations = [
        expanded_annotations(a, external_labels=external_labels, external_url=external_url)
        for a in notification.alerts
    ]
    return {
        "version": "4",
        "groupKey": notification.group_key,
        "truncatedAlerts": len(notification.alerts) - len(alerts),
        "status": notification.status.value,
        "receiver": notification.receiver,
        "groupLabels": notification.group_labels,
        "commonLabels": _common(a.labels for a in notification.alerts),
        "commonAnnotations": _common(annotations),
        "externalURL": external_url,
        "alerts": [_webhook_alert(a, generator, n) for a, n in zip(alerts, annotations, strict=False)],
    }


def dedup_key(group_key: str) -> str:
    """PagerDuty dedup_key: the same for every trigger and resolve of one alert group (≤ 255 chars)."""
    return hashlib.sha256(group_key.encode()).hexdigest()


def _summary(notification: Notification) -> str:
    firing = [a for a in notification.alerts if a.status is AlertStatus.FIRING]
    name = notification.group_labels.get("alertname", "alerts")
    where = ", ".join(f"{k}={v}" for k, v in sorted(notification.group_labels.items()) if k != "alertname")
    text = f"[{notification.status.value.upper()}:{len(firing)}] {name} {where}".strip()
    return text[:_PD_SUMMARY_MAX]


def pagerduty_event(
    notification: Notification, *, routing_key: str, source: str, client_url: str
) -> dict[str, Any]:
    """Events API v2 body: trigger while anything fires, resolve when the whole group has resolved."""
    key = dedup_key(notification.group_key)
    if notification.status is AlertStatus.RESOLVED:
        return {"routing_key": routing_key, "event_action": "resolve", "dedup_key": key}
    severity = _common(a.labels for a in notification.alerts).get("severity", "critical")
    return {
        "routing_key": routing_key,
        "event_action": "trigger",
        "dedup_key": key,
        "payload": {
            "summary": _summary(notification),
            "source": source,
            "severity": PAGERDUTY_SEVERITY.get(severity, "error"),
            "timestamp": _rfc3339(notification.created_at),
            "group": notification.group_labels.get("node", ""),
            "class": notification.group_labels.get("alertname", ""),
            "custom_details": {
                "firing": [a.labels for a in notification.alerts if a.status is AlertStatus.FIRING],
                "resolved": [a.labels for a in notification.alerts if a.status is AlertStatus.RESOLVED],
                "num_firing": sum(a.status is AlertStatus.FIRING for a in notification.alerts),
            },
        },
        "client": "gpucloud alerting",
        "client_url": client_url,
    }


def _alert_block(alert: Alert) -> dict[str, Any]:
    icon = ":red_circle:" if alert.status is AlertStatus.FIRING else ":large_green_circle:"
    labels = ", ".join(f"`{k}={v}`" for k, v in sorted(alert.labels.items()))
    annotations = expanded_annotations(alert)
    text = f"{icon} *{annotations.get('summary', alert.labels.get('alertname', ''))}*\n{labels}"
    runbook = annotations.get("runbook_url")
    if runbook:
        text += f"\n<{runbook}|Runbook>"
    return {"type": "section", "text": {"type": "mrkdwn", "text": text[:_SLACK_SECTION_MAX]}}


def slack_message(notification: Notification) -> dict[str, Any]:
    """Incoming-webhook body: `text` is the notification fallback, `blocks` the rich layout."""
    text = _summary(notification)
    shown = notification.alerts[:_SLACK_ALERT_BLOCKS]
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": text[:_SLACK_HEADER_MAX]}},
        *(_alert_block(a) for a in shown),
    ]
    hidden = len(notification.alerts) - len(shown)
    if hidden:
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": f"and {hidden} more"}]})
    return {"text": text, "blocks": blocks}
