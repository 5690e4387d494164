from __future__ import annotations

import json

from services.alerting.domain.grouping import Notification
from services.alerting.domain.payloads import alertmanager_webhook, dedup_key, pagerduty_event, slack_message
from tests.unit.alerting.builders import alert
from tests.unit.alerting.clock import at

KEY = '{}:{alertname="GpuMemoryHigh", node="node-a"}'
GROUP = {"alertname": "GpuMemoryHigh", "node": "node-a"}


def notification(*alerts_: object, n: int = 0) -> Notification:
    chosen = alerts_ or (alert(gpu="GPU-1"), alert(gpu="GPU-2"))
    return Notification.model_validate(
        {
            "id": f"x-{n}",
            "receiver": "oncall",
            "group_key": KEY,
            "group_labels": GROUP,
            "alerts": chosen,
            "created_at": at(300),
        }
    )


def test_webhook_has_every_alertmanager_v4_field() -> None:
    body = alertmanager_webhook(notification(), external_url="https://alerts.example")
    assert set(body) == {
        "version",
        "groupKey",
        "truncatedAlerts",
        "status",
        "receiver",
        "groupLabels",
        "commonLabels",
        "commonAnnotations",
        "externalURL",
        "alerts",
    }
    assert (body["version"], body["status"], body["groupKey"], body["truncatedAlerts"]) == (
        "4",
        "firing",
        KEY,
        0,
    )
    assert set(body["alerts"][0]) == {
        "status",
        "labels",
        "annotations",
        "startsAt",
        "endsAt",
        "generatorURL",
        "fingerprint",
    }


def test_webhook_common_labels_are_those_all_alerts_share() -> None:
    body = alertmanager_webhook(notification(), external_url="https://alerts.example")
    assert body["commonLabels"] == {"alertname": "GpuMemoryHigh", "node": "node-a", "severity": "critical"}
    assert body["commonAnnotations"] == {
        "summary": "GpuMemoryHigh on node-a",
        "runbook_url": "https://runbooks.example/x",
    }


def test_webhook_times_are_rfc3339_with_go_zero_time_for_open_alerts() -> None:
    body = alertmanager_webhook(notification(alert(ends_at=at(60))), external_url="https://a")
    firing = alertmanager_webhook(notification(), external_url="https://a")
    assert body["alerts"][0]["endsAt"] == "2025-01-01T12:01:00Z"
    assert body["status"] == "resolved"
    assert firing["alerts"][0]["endsAt"] == "0001-01-01T00:00:00Z"
    assert firing["alerts"][0]["startsAt"] == "2025-01-01T12:00:00Z"


def test_webhook_truncation_is_counted() -> None:
    body = alertmanager_webhook(notification(), external_url="https://a", max_alerts=1)
    assert len(body["alerts"]) == 1
    assert body["truncatedAlerts"] == 1


def test_pagerduty_trigger_carries_the_events_v2_fields() -> None:
    event = pagerduty_event(notification(), routing_key="R" * 32, source="gpucloud", client_url="https://a")
    assert event["event_action"] == "trigger"
    assert event["routing_key"] == "R" * 32
    assert set(event["payload"]) >= {"summary", "source", "severity", "custom_details"}
    assert event["payload"]["severity"] == "critical"
    assert event["payload"]["summary"].startswith("[FIRING:2] GpuMemoryHigh")
    assert len(event["dedup_key"]) <= 255


def test_pagerduty_resolve_reuses_the_trigger_dedup_key() -> None:
    trigger = pagerduty_event(notification(n=1), routing_key="r", source="s", client_url="c")
    resolve = pagerduty_event(
        notification(alert(ends_at=at(60)), n=2), routing_key="r", source="s", client_url="c"
    )
    assert resolve == {"routing_key": "r", "event_action": "resolve", "dedup_key": trigger["dedup_key"]}
    assert trigger["dedup_key"] == dedup_key(KEY)


def test_slack_message_has_fallback_text_and_a_block_per_alert() -> None:
    message = slack_message(notification())
    assert message["text"].startswith("[FIRING:2]")
    assert [b["type"] for b in message["blocks"]] == ["header", "section", "section"]
    assert "<https://runbooks.example/x|Runbook>" in message["blocks"][1]["text"]["text"]


def test_every_payload_is_json_serialisable() -> None:
    n = notification()
    bodies = [
        alertmanager_webhook(n, external_url="https://a"),
        slack_message(n),
        pagerduty_event(n, routing_key="r", source="s", client_url="c"),
    ]
    assert all(json.loads(json.dumps(b)) == b for b in bodies)
