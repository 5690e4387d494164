"""Pending alerts through the API: listed with their `for` countdown, then firing; per tenant."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import httpx
from fastapi import FastAPI

from services.alerting.app import create_app
from tests.integration.alerting.helpers import Feeder, alerting_settings
from tests.integration.support import (
    ADMIN_HEADERS,
    Isolation,
    eventually,
    key_works,
    provision_tenant,
    running,
)

RULE = {
    "name": "MemHighSoon",
    "metric": "fb_used_pct",
    "comparator": ">",
    "threshold": 90,
    "for": "5s",
    "matchers": [{"name": "node", "op": "=~", "value": "soon-.*"}],
    "severity": "critical",
}


async def test_a_crossing_is_listed_pending_with_its_countdown_then_firing_and_each_tenant_sees_its_own(
    isolation: Isolation,
) -> None:
    app = create_app(alerting_settings(isolation))
    ours = Feeder(isolation, node="soon-a", mem_pct=50, tenant="acme")
    theirs = Feeder(isolation, node="soon-b", mem_pct=50, tenant="globex")
    async with running(app) as client, ours.running(), theirs.running():
        key = await provision_tenant(isolation, "acme")
        created = await client.post("/v1/rules", json=RULE, headers=ADMIN_HEADERS)
        assert created.status_code == 201, created.text
        await eventually(
            lambda: key_works(client, key, "/v1/alerts"), timeout=20, what="tenant key replicated"
        )
        await eventually(lambda: _loaded(app), timeout=20, what="rule loaded by the evaluator")
        acme = {"X-API-Key": key}
        ours.mem_pct = theirs.mem_pct = 95

        pending = await eventually(
            lambda: _count(client, "pending", ADMIN_HEADERS, 2), timeout=10, what="pending"
        )
        crossed = ours.first_at(lambda pct: pct > 90)
        mine = next(a for a in pending if a["tenant"] == "acme")
        assert (mine["status"], mine["labels"]["node"], mine["ends_at"]) == ("pending", "soon-a", None)
        active_at, fires_at = _time(mine["active_at"]), _time(mine["fires_at"])
        assert fires_at - active_at == timedelta(seconds=5)
        assert timedelta(0) <= active_at - crossed < timedelta(seconds=1)
        assert _time(mine["starts_at"]) == active_at
        assert await _alerts(client, "firing", ADMIN_HEADERS) == []
        assert [a["status"] for a in await _alerts(client, "all", ADMIN_HEADERS)] == ["pending", "pending"]

        seen = await _alerts(client, "pending", acme)
        assert [(a["tenant"], a["fingerprint"]) for a in seen] == [("acme", mine["fingerprint"])]
        other = await client.get("/v1/alerts?state=pending&tenant=globex", headers=acme)
        assert other.status_code == 403
        bogus = await client.get("/v1/alerts?state=bogus", headers=acme)
        assert (bogus.status_code, bogus.json()["error"]["field"]) == (422, "state")

        firing = await eventually(
            lambda: _count(client, "firing", ADMIN_HEADERS, 2), timeout=10, what="firing"
        )
        assert {a["fingerprint"] for a in firing} == {a["fingerprint"] for a in pending}
        assert all(a["active_at"] is None and a["fires_at"] is None for a in firing)
        assert await _alerts(client, "pending", ADMIN_HEADERS) == []
        ours_now = await _alerts(client, "all", acme)
        assert [(a["status"], a["fingerprint"]) for a in ours_now] == [("firing", mine["fingerprint"])]
        # The shipped GpuMemoryHigh (`for: 5m`) saw the same crossing: still pending, and acme's only.
        defaults = (await client.get("/v1/alerts?state=pending", headers=acme)).json()
        assert [(a["rule"], a["tenant"]) for a in defaults] == [("GpuMemoryHigh", "acme")]


async def _loaded(app: FastAPI) -> bool:
    return RULE["name"] in app.state.evaluator.rule_names


async def _alerts(client: httpx.AsyncClient, state: str, headers: dict[str, str]) -> list[dict[str, Any]]:
    """This test rule's alerts in `state`, as the caller sees them."""
    response = await client.get(f"/v1/alerts?state={state}", headers=headers)
    assert response.status_code == 200, response.text
    return [a for a in response.json() if a["rule"] == RULE["name"]]


async def _count(
    client: httpx.AsyncClient, state: str, headers: dict[str, str], count: int
) -> list[dict[str, Any]] | None:
    found = await _alerts(client, state, headers)
    return found if len(found) == count else None


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


async def test_an_evaluator_taking_over_keeps_the_restored_pending_alerts_and_drops_the_rest(
    isolation: Isolation,
) -> None:
    settings = alerting_settings(isolation)
    feeder = Feeder(isolation, node="soon-c", mem_pct=95)
    first = create_app(settings)
    async with running(first) as client, feeder.running():
        created = await client.post("/v1/rules", json={**RULE, "for": "60s"}, headers=ADMIN_HEADERS)
        assert created.status_code == 201, created.text
        (listed,) = await eventually(
            lambda: _count(client, "pending", ADMIN_HEADERS, 1), timeout=20, what="pending"
        )
        # A pending alert the next evaluator cannot vouch for (a prometheus-mode one: those start over).
        await first.state.runtime.pool.execute(
            "INSERT INTO pending_alerts VALUES ('f0f0f0f0f0f0f0f0', 'Gone', NULL, 'warning', '{}', '{}', "
            "NULL, now(), now() + interval '1 minute')"
        )
        assert "Gone" in {
            a["rule"] for a in (await client.get("/v1/alerts?state=pending", headers=ADMIN_HEADERS)).json()
        }
    second = create_app(settings)
    async with running(second) as client:
        after = await eventually(
            lambda: _without(client, "Gone"), timeout=20, what="the second evaluator's list"
        )
    kept = [(a["fingerprint"], a["active_at"], a["fires_at"]) for a in after if a["rule"] != "GpuMemoryHigh"]
    assert kept == [(listed["fingerprint"], listed["active_at"], listed["fires_at"])]


async def _without(client: httpx.AsyncClient, rule: str) -> list[dict[str, Any]] | None:
    """The pending list (admin's view) once no alert of `rule` is on it."""
    found: list[dict[str, Any]] = (await client.get("/v1/alerts?state=pending", headers=ADMIN_HEADERS)).json()
    return None if any(a["rule"] == rule for a in found) else found
