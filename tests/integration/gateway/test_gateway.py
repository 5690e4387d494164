"""The gateway process against real services and Redis: sessions, CSRF, the proxy's tenant isolation,
revocation, and the live stream's filtering, heartbeats and resume."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from libs.common.settings import DEV_ADMIN_KEY
from services.gateway.app import create_app
from services.gateway.settings import GatewaySettings
from tests.integration.flows.journey import NETWORK
from tests.integration.gateway.conftest import HOT, GatewayStack
from tests.integration.support import ADMIN_HEADERS, eventually

pytestmark = pytest.mark.integration

Frames = list[str]


@asynccontextmanager
async def _browser(gs: GatewayStack, tenant: str | None = None) -> AsyncIterator[httpx.AsyncClient]:
    """A client with the gateway's cookies, logged in as ``tenant`` (when given)."""
    async with httpx.AsyncClient(base_url=gs.url, timeout=20) as client:
        if tenant is not None:
            made = await client.post("/api/session", json={"api_key": gs.keys[tenant]})
            assert made.status_code == 200, made.text
            client.headers["X-CSRF-Token"] = made.json()["csrf_token"]
        yield client


def _event(frame: str) -> dict[str, Any]:
    fields = dict(line.split(": ", 1) for line in frame.split("\n") if not line.startswith(":"))
    return {"id": fields["id"], "event": fields["event"], "data": json.loads(fields["data"])}


async def _read(
    client: httpx.AsyncClient,
    query: str,
    *,
    enough: Callable[[Frames], bool],
    last_event_id: str | None = None,
    timeout: float = 20,
) -> Frames:
    """The frames of one live connection, read until ``enough`` of them came; then it closes."""
    headers = {"Last-Event-ID": last_event_id} if last_event_id else {}
    frames: Frames = []
    async with asyncio.timeout(timeout), client.stream("GET", f"/api/live?{query}", headers=headers) as live:
        assert live.status_code == 200, await live.aread()
        assert live.headers["content-type"].startswith("text/event-stream")
        pending = ""
        async for text in live.aiter_text():
            *done, pending = (pending + text).split("\n\n")
            frames += done
            if enough(frames):
                return frames
    raise AssertionError(f"the stream ended after {frames}")


def _events(frames: Frames, kind: str | None = None) -> list[dict[str, Any]]:
    events = [_event(f) for f in frames if f.startswith("id: ")]
    return [e for e in events if kind is None or e["event"] == kind]


async def test_a_good_key_opens_a_strict_httponly_session_and_a_bad_key_is_refused(gs: GatewayStack) -> None:
    async with _browser(gs) as client:
        refused = await client.post("/api/session", json={"api_key": "no-such-key-anywhere"})
        assert refused.status_code == 401
        assert refused.json()["error"]["code"] == "unauthorized"
        made = await client.post("/api/session", json={"api_key": gs.keys["gwa"]})
        assert made.status_code == 200, made.text
        assert made.json()["tenant_id"] == "gwa"
        assert made.json()["role"] == "tenant"
        cookies = {c.split("=", 1)[0]: c.lower() for c in made.headers.get_list("set-cookie")}
        assert "httponly" in cookies["gpucloud_session"]
        assert "samesite=strict" in cookies["gpucloud_session"]
        assert "samesite=strict" in cookies["gpucloud_csrf"]
        assert "httponly" not in cookies["gpucloud_csrf"]
        again = await client.get("/api/session")
        assert again.json() == made.json()
    async with _browser(gs) as client:
        admin = await client.post("/api/session", json={"api_key": DEV_ADMIN_KEY})
        assert admin.json()["role"] == "admin"
        assert admin.json()["tenant_id"] is None


async def test_an_unsafe_request_without_the_token_or_from_another_origin_changes_nothing(
    gs: GatewayStack,
) -> None:
    async with _browser(gs, "gwb") as client:
        before = (await client.get("/api/scheduler/v1/workloads")).json()
        token = client.headers.pop("X-CSRF-Token")
        body = {"kind": "job", "image": {"name": "pytorch", "version": "2.3"},
                "resources": {"kind": "gpu", "model": "L4", "count": 1}, "network": NETWORK}  # fmt: skip
        missing = await client.post("/api/scheduler/v1/workloads", json=body)
        assert missing.status_code == 403
        assert missing.json()["error"]["code"] == "csrf"
        foreign = await client.post(
            "/api/scheduler/v1/workloads",
            json=body,
            headers={"X-CSRF-Token": token, "Origin": "http://evil.example"},
        )
        assert foreign.status_code == 403
        assert foreign.json()["error"]["field"] == "Origin"
        assert (await client.get("/api/scheduler/v1/workloads")).json() == before


async def test_after_logout_the_cookie_no_longer_works(gs: GatewayStack) -> None:
    async with _browser(gs, "gwb") as client:
        cookie = client.cookies["gpucloud_session"]
        assert (await client.delete("/api/session")).status_code == 204
    async with httpx.AsyncClient(base_url=gs.url, cookies={"gpucloud_session": cookie}) as stale:
        assert (await stale.get("/api/session")).status_code == 401
        assert (await stale.get("/api/scheduler/v1/workloads")).status_code == 401


async def test_an_expired_session_is_refused(gs: GatewayStack) -> None:
    settings = GatewaySettings(
        redis_url=gs.iso.infra.redis_url,
        redis_prefix=gs.iso.redis_prefix,
        scheduler_url=gs.stack.url("scheduler"),
        session_ttl_s=1,
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as client:
            made = await client.post("/api/session", json={"api_key": gs.keys["gwb"]})
            assert made.status_code == 200, made.text
            assert (await client.get("/api/scheduler/v1/workloads")).status_code == 200

            async def expired() -> bool:
                return (await client.get("/api/session")).status_code == 401

            await eventually(expired, timeout=5, interval=0.2, what="the session to expire")
            assert (await client.get("/api/scheduler/v1/workloads")).status_code == 401


async def test_tenant_b_cannot_read_tenant_as_workload_and_lists_only_its_own(gs: GatewayStack) -> None:
    async with _browser(gs, "gwa") as a, _browser(gs, "gwb") as b:
        assert (await a.get(f"/api/scheduler/v1/workloads/{gs.job}")).status_code == 200
        foreign = await b.get(f"/api/scheduler/v1/workloads/{gs.job}")
        assert foreign.status_code in (403, 404)
        assert "error" in foreign.json()
        listed = await b.get("/api/scheduler/v1/workloads")
        assert listed.status_code == 200
        assert gs.job not in json.dumps(listed.json())
        assert gs.job in json.dumps((await a.get("/api/scheduler/v1/workloads")).json())
        gpus = await b.get("/api/telemetry/v1/gpus/latest")
        assert gs.gpu not in gpus.text
        rule = {**HOT, "name": "gw_b_only"}
        made = await b.post("/api/alerting/v1/rules", json=rule)  # a body streamed through, with the token
        assert made.status_code == 201, made.text
        assert "gw_b_only" in (await b.get("/api/alerting/v1/rules")).text
        assert "gw_b_only" not in (await a.get("/api/alerting/v1/rules")).text


async def test_a_revoked_keys_session_ends_on_its_next_call(gs: GatewayStack) -> None:
    async with _browser(gs, "gwc") as client:
        key_id = (await client.get("/api/session")).json()["key_id"]
        async with httpx.AsyncClient(base_url=gs.stack.url("scheduler")) as scheduler:
            revoked = await scheduler.delete(f"/v1/admin/keys/{key_id}", headers=ADMIN_HEADERS)
        assert revoked.status_code == 204, revoked.text
        assert (await client.get("/api/scheduler/v1/workloads")).status_code == 401
        assert (await client.get("/api/session")).status_code == 401


async def test_tenant_bs_live_stream_carries_none_of_tenant_as_samples_or_alerts(gs: GatewayStack) -> None:
    query = f"gpus={gs.gpu}&alerts=1&incidents=1"

    def has(kind: str, n: int = 1, *, where: Callable[[dict[str, Any]], bool] = lambda e: True) -> Any:
        return lambda frames: len([e for e in _events(frames, kind) if where(e)]) >= n

    async with _browser(gs, "gwa") as a, _browser(gs, "gwb") as b:
        firing = has("alerts", where=lambda e: bool(e["data"]["alerts"]))
        mine = await _read(a, query, enough=lambda f: has("samples", 2)(f) and firing(f), timeout=30)
        theirs = await _read(b, query, enough=lambda f: has("samples", 3)(f) and has("incidents")(f))
        own_alerts = (await b.get("/api/alerting/v1/alerts")).json()
    rows = [row for e in _events(mine, "samples") for row in e["data"]["samples"]]
    assert rows
    assert {row["gpu"] for row in rows} == {gs.gpu}
    assert all(row["tenant_id"] == "gwa" for row in rows)
    assert any(alert for e in _events(mine, "alerts") for alert in e["data"]["alerts"])
    assert theirs[0] == "retry: 2000"
    assert all(e["data"] == {"samples": []} for e in _events(theirs, "samples"))
    alerts = [e["data"]["alerts"] for e in _events(theirs, "alerts")]
    assert alerts == [own_alerts]
    assert gs.gpu not in json.dumps(alerts)


async def test_heartbeats_arrive_and_a_reconnect_with_last_event_id_replays_what_was_missed(
    gs: GatewayStack,
) -> None:
    async with _browser(gs, "gwa") as a:
        first = await _read(a, f"gpus={gs.gpu}", enough=lambda f: len(_events(f)) >= 4 and ": heartbeat" in f)
        events = _events(first)
        token = events[0]["id"].rsplit(".", 1)[0]
        assert [e["id"] for e in events] == [f"{token}.{seq}" for seq in range(1, len(events) + 1)]
        resumed = await _read(
            a, f"gpus={gs.gpu}", enough=lambda f: len(_events(f)) >= 4, last_event_id=events[1]["id"]
        )
    again = _events(resumed)
    assert again[: len(events) - 2] == events[2:]  # the missed ones, as they were first sent
    assert [e["id"] for e in again] == [f"{token}.{seq}" for seq in range(3, 3 + len(again))]


@pytest.fixture
def gs(gateway_stack: GatewayStack) -> GatewayStack:
    return gateway_stack
