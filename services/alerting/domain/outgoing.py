"""The HTTP request for one notification to one receiver: body by receiver kind, signed headers."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from services.alerting.domain.grouping import Notification
from services.alerting.domain.payloads import alertmanager_webhook, pagerduty_event, slack_message
from services.alerting.domain.signing import sign

__all__ = ["IDEMPOTENCY_HEADER", "RECEIVER_KINDS", "OutgoingRequest", "build_request"]

IDEMPOTENCY_HEADER = "Idempotency-Key"
RECEIVER_KINDS = ("webhook", "pagerduty", "slack")


@dataclass(frozen=True, slots=True)
class OutgoingRequest:
    """What to POST: the exact bytes that were signed, and the headers."""

    url: str
    body: bytes
    headers: dict[str, str]


def _body(
    kind: str, notification: Notification, *, routing_key: str | None, external_url: str
) -> dict[str, Any]:
    if kind == "pagerduty":
        return pagerduty_event(
            notification, routing_key=routing_key or "", source="gpucloud-alerting", client_url=external_url
        )
    if kind == "slack":
        return slack_message(notification)
    return alertmanager_webhook(notification, external_url=external_url)


def build_request(
    *,
    kind: str,
    url: str,
    notification: Notification,
    secret: str,
    routing_key: str | None,
    external_url: str,
    timestamp: int,
) -> OutgoingRequest:
    """The signed request; the idempotency key is the notification id, the same on every retry."""
    body = _body(kind, notification, routing_key=routing_key, external_url=external_url)
    raw = json.dumps(body, separators=(",", ":"), sort_keys=True).encode()
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "gpucloud-alerting/1",
        IDEMPOTENCY_HEADER: notification.id,
        **sign(secret=secret.encode(), body=raw, timestamp=timestamp),
    }
    return OutgoingRequest(url=url, body=raw, headers=headers)
