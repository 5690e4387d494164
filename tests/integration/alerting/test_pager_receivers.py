"""PagerDuty (Events API v2) and Slack (incoming webhook) over real HTTP: one alert, both receivers, in order.

The two routes have the same matchers (the pager's with ``continue``), so this also covers routes that
must not share their alert groups.
"""

from __future__ import annotations

from typing import Any

from services.alerting.app import create_app
from tests.integration.alerting.helpers import (
    Feeder,
    Receiver,
    add_memory_rule,
    alerting_settings,
    receiving,
)
from tests.integration.support import ADMIN_HEADERS, Isolation, eventually, running

ROUTING_KEY = "R0123456789abcdef0123456789abcd"
MATCH = [{"name": "alertname", "op": "=", "value": "MemPager"}]


async def _configure(client: Any, pagerduty: Receiver, slack: Receiver) -> None:
    receivers = [
        {"name": "oncall", "kind": "pagerduty", "url": pagerduty.url, "routing_key": ROUTING_KEY},
        {"name": "chat", "kind": "slack", "url": slack.url},
    ]
    for body in receivers:
        response = await client.post("/v1/receivers", json=body, headers=ADMIN_HEADERS)
        assert response.status_code == 201, response.text
    fast = {"group_wait": 0, "group_interval": 1}
    tree = {
        "default": {"receiver": "chat", **fast},
        "routes": [
            {"receiver": "oncall", "matchers": MATCH, "continue_matching": True, **fast},
            {"receiver": "chat", "matchers": MATCH, **fast},
        ],
    }
    response = await client.put("/v1/routes", json=tree, headers=ADMIN_HEADERS)
    assert response.status_code == 200, response.text


async def test_one_alert_triggers_and_resolves_pagerduty_and_posts_both_to_slack(
    isolation: Isolation,
) -> None:
    app = create_app(alerting_settings(isolation))
    feeder = Feeder(isolation, node="pager-node", mem_pct=50)
    async with (
        receiving(lambda: 202) as pagerduty,  # the Events API answers 202 Accepted
        receiving() as slack,
        running(app) as client,
        feeder.running(),
    ):
        await _configure(client, pagerduty, slack)
        await add_memory_rule(client, name="MemPager", node="pager-node", for_="1s")

        async def rule_loaded() -> bool:  # loaded with the receivers and routes configured before it
            return "MemPager" in app.state.evaluator.rule_names

        await eventually(rule_loaded, timeout=20, what="rule loaded by the evaluator")
        feeder.mem_pct = 95

        async def both_fired() -> bool:
            return len(pagerduty.accepted()) >= 1 and len(slack.accepted()) >= 1

        await eventually(both_fired, timeout=30, what="PagerDuty trigger and Slack message")
        feeder.mem_pct = 40

        async def both_resolved() -> bool:
            return len(pagerduty.accepted()) >= 2 and len(slack.accepted()) >= 2

        await eventually(both_resolved, timeout=30, what="PagerDuty resolve and Slack message")

    events = [r.json() for r in pagerduty.accepted()]
    assert [e["event_action"] for e in events] == ["trigger", "resolve"]
    assert {e["routing_key"] for e in events} == {ROUTING_KEY}
    assert len({e["dedup_key"] for e in events}) == 1  # the resolve closes the incident the trigger opened
    trigger = events[0]["payload"]
    assert trigger["severity"] == "critical"
    assert "MemPager" in trigger["summary"]
    assert trigger["group"] == "pager-node"
    assert trigger["custom_details"]["num_firing"] == 1
    assert all(r.headers["content-type"] == "application/json" for r in pagerduty.accepted())

    messages = [r.json() for r in slack.accepted()]
    assert len(messages) == 2
    assert messages[0]["text"].startswith("[FIRING:1] MemPager")
    assert messages[1]["text"].startswith("[RESOLVED")
    for message in messages:
        assert message["blocks"][0]["type"] == "header"
        assert any("pager-node" in b["text"]["text"] for b in message["blocks"][1:])
