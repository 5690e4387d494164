"""The gateway app end to end in process (sessions in memory, services faked): cookies, CSRF, the proxy,
revocation and the console."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.unit.gateway.fakes import TENANT_KEY, FakeServices, gateway_app

BASE = "http://127.0.0.1:8000"


@pytest.fixture
def services() -> FakeServices:
    return FakeServices()


@pytest.fixture
def console(tmp_path: Path) -> Path:
    (tmp_path / "assets").mkdir()
    (tmp_path / "index.html").write_text("<!doctype html><title>gpucloud</title>")
    (tmp_path / "assets" / "app-1234.js").write_text("console.log(1)")
    (tmp_path / "favicon.svg").write_text("<svg/>")
    return tmp_path


@pytest.fixture
async def client(services: FakeServices, console: Path) -> AsyncIterator[httpx.AsyncClient]:
    app, _ = gateway_app(services, console_dir=console, max_request_bytes=2048)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as c:
        yield c


async def _login(client: httpx.AsyncClient) -> str:
    made = await client.post("/api/session", json={"api_key": TENANT_KEY})
    assert made.status_code == 200, made.text
    return str(made.json()["csrf_token"])


def _cookie(response: httpx.Response, name: str) -> str:
    found = [v for v in response.headers.get_list("set-cookie") if v.startswith(f"{name}=")]
    assert len(found) == 1, response.headers
    return found[0]


async def test_login_sets_an_httponly_strict_session_cookie_and_a_readable_csrf_cookie(
    client: httpx.AsyncClient,
) -> None:
    made = await client.post("/api/session", json={"api_key": TENANT_KEY})
    assert made.status_code == 200, made.text
    body = made.json()
    assert {k: body[k] for k in ("tenant_id", "role", "key_id")} == {
        "tenant_id": "acme",
        "role": "tenant",
        "key_id": "k-acme",
    }
    assert body["expires_at"]
    assert "api_key" not in body
    session, csrf = _cookie(made, "gpucloud_session"), _cookie(made, "gpucloud_csrf")
    for cookie in (session, csrf):
        assert "samesite=strict" in cookie.lower()
        assert "Path=/" in cookie
        assert "secure" not in cookie.lower()  # development: plain http://127.0.0.1
    assert "httponly" in session.lower()
    assert "httponly" not in csrf.lower()
    assert csrf.startswith(f"gpucloud_csrf={body['csrf_token']};")
    assert (await client.get("/api/session")).json() == body


async def test_cookies_are_secure_when_configured(services: FakeServices, console: Path) -> None:
    app, _ = gateway_app(services, console_dir=console, cookie_secure=True)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as c:
        made = await c.post("/api/session", json={"api_key": TENANT_KEY})
    assert "secure" in _cookie(made, "gpucloud_session").lower()
    assert "secure" in _cookie(made, "gpucloud_csrf").lower()


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [({"api_key": "nope"}, 401, "api_key"), ({"api_key": ""}, 422, "api_key"), ({}, 422, "api_key")],
)
async def test_a_bad_key_is_refused_in_the_error_shape(
    client: httpx.AsyncClient, body: dict[str, str], status: int, field: str
) -> None:
    refused = await client.post("/api/session", json=body)
    assert refused.status_code == status
    assert refused.json()["error"]["field"] == field
    assert "set-cookie" not in refused.headers


async def test_an_unsafe_request_without_the_csrf_token_is_refused_before_any_service_sees_it(
    client: httpx.AsyncClient, services: FakeServices
) -> None:
    csrf = await _login(client)
    seen = len(services.seen)
    refused = await client.post("/api/scheduler/v1/workloads", json={"kind": "job"})
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "csrf"
    wrong = await client.post("/api/scheduler/v1/workloads", json={}, headers={"X-CSRF-Token": "x" + csrf})
    assert wrong.status_code == 403
    assert len(services.seen) == seen
    assert (await client.delete("/api/session")).status_code == 403  # logging out is unsafe too


async def test_a_foreign_origin_is_refused_even_with_the_token(client: httpx.AsyncClient) -> None:
    csrf = await _login(client)
    headers = {"X-CSRF-Token": csrf, "Origin": "https://evil.example"}
    refused = await client.post("/api/scheduler/v1/workloads", json={}, headers=headers)
    assert refused.status_code == 403
    assert refused.json()["error"]["field"] == "Origin"
    login = await client.post("/api/session", json={"api_key": TENANT_KEY}, headers={"Origin": "null"})
    assert login.status_code == 403
    same = await client.post("/api/scheduler/v1/workloads", json={}, headers={**headers, "Origin": BASE})
    assert same.status_code == 200


async def test_the_proxy_sends_the_sessions_key_and_never_the_browsers_credentials(
    client: httpx.AsyncClient, services: FakeServices
) -> None:
    csrf = await _login(client)
    headers = {
        "X-CSRF-Token": csrf,
        "Authorization": "Bearer forged",
        "X-API-Key": "forged",
        "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "Idempotency-Key": "idem-1",
    }
    sent = await client.post("/api/scheduler/v1/workloads?dry_run=1", json={"a": 1}, headers=headers)
    assert sent.status_code == 200, sent.text
    assert sent.json() == {"method": "POST", "path": "/v1/workloads", "query": "dry_run=1", "body": '{"a":1}'}
    upstream = services.seen[-1]
    assert upstream.url.port == 8002
    assert upstream.headers.get_list("x-api-key") == [TENANT_KEY]
    assert "authorization" not in upstream.headers
    assert "cookie" not in upstream.headers
    assert "x-csrf-token" not in upstream.headers
    assert upstream.headers["traceparent"].startswith("00-0af7651916cd43dd")
    assert upstream.headers["idempotency-key"] == "idem-1"


async def test_a_download_keeps_its_type_and_name_but_not_the_services_cookies(
    client: httpx.AsyncClient,
) -> None:
    await _login(client)
    got = await client.get("/api/billing/v1/exports/bill.csv")
    assert got.status_code == 200
    assert got.content == b"a,b\n1,2\n"
    assert got.headers["content-type"] == "text/csv"
    assert got.headers["content-disposition"] == 'attachment; filename="bill.csv"'
    assert "x=1" not in got.headers.get_list("set-cookie")


async def test_no_session_unknown_service_down_service_and_large_bodies_answer_in_the_error_shape(
    client: httpx.AsyncClient, services: FakeServices
) -> None:
    assert (await client.get("/api/scheduler/v1/workloads")).status_code == 401
    csrf = await _login(client)
    unknown = await client.get("/api/nosuch/v1/x")
    assert unknown.status_code == 404
    assert unknown.json()["error"]["field"] == "service"
    services.down.add("telemetry")
    down = await client.get("/api/telemetry/v1/gpus")
    assert down.status_code == 502
    assert "telemetry" in down.json()["error"]["message"]
    big = await client.post(
        "/api/scheduler/v1/workloads", content=b"x" * 4096, headers={"X-CSRF-Token": csrf}
    )
    assert big.status_code == 413
    assert big.json()["error"]["field"] == "body"


async def test_a_revoked_keys_session_is_deleted_on_its_next_call(
    client: httpx.AsyncClient, services: FakeServices
) -> None:
    await _login(client)
    services.revoked.add(TENANT_KEY)
    refused = await client.get("/api/scheduler/v1/workloads")
    assert refused.status_code == 401
    assert any(c.startswith('gpucloud_session=""') for c in refused.headers.get_list("set-cookie"))
    services.revoked.clear()  # even were the key valid again, the session is gone
    client.cookies.clear()
    assert (await client.get("/api/session")).status_code == 401


async def test_a_service_that_has_not_heard_of_the_key_yet_does_not_end_the_session(
    client: httpx.AsyncClient, services: FakeServices
) -> None:
    await _login(client)
    services.unaware.add("telemetry")
    assert (await client.get("/api/telemetry/v1/gpus/latest")).status_code == 401
    assert (await client.get("/api/session")).status_code == 200
    services.unaware.clear()
    assert (await client.get("/api/telemetry/v1/gpus/latest")).status_code == 200


async def test_logout_deletes_the_session_and_clears_both_cookies(client: httpx.AsyncClient) -> None:
    csrf = await _login(client)
    token = client.cookies["gpucloud_session"]
    out = await client.delete("/api/session", headers={"X-CSRF-Token": csrf})
    assert out.status_code == 204
    cleared = out.headers.get_list("set-cookie")
    assert any(c.startswith('gpucloud_session=""') for c in cleared)
    assert any(c.startswith('gpucloud_csrf=""') for c in cleared)
    client.cookies.set("gpucloud_session", token)
    again = await client.get("/api/session")
    assert again.status_code == 401


async def test_the_console_is_served_with_security_headers_and_an_spa_fallback(
    client: httpx.AsyncClient,
) -> None:
    index = await client.get("/")
    assert index.status_code == 200
    assert "<title>gpucloud</title>" in index.text
    assert index.headers["cache-control"] == "no-cache"
    csp = index.headers["content-security-policy"]
    assert "default-src 'self'" in csp
    assert "style-src 'self' 'unsafe-inline'" in csp
    assert "script-src 'self'" in csp
    assert "unsafe-inline" not in csp.split("script-src")[1].split(";")[0]
    assert index.headers["x-frame-options"] == "DENY"
    assert index.headers["x-content-type-options"] == "nosniff"
    assert index.headers["referrer-policy"]
    deep = await client.get("/workloads/w-123")
    assert deep.status_code == 200
    assert deep.text == index.text
    asset = await client.get("/assets/app-1234.js")
    assert asset.text == "console.log(1)"
    assert "immutable" in asset.headers["cache-control"]
    assert (await client.get("/favicon.svg")).headers["cache-control"] == "no-cache"
    escape = await client.get("/..%2f..%2fetc/passwd")
    assert escape.text == index.text
    missing = await client.get("/api/nope")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"


async def test_an_unbuilt_console_answers_503_saying_how_to_build_it(
    services: FakeServices, tmp_path: Path
) -> None:
    app, _ = gateway_app(services, console_dir=tmp_path / "nothing")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as c:
        answer = await c.get("/")
    assert answer.status_code == 503
    assert answer.json()["error"]["code"] == "console_not_built"
    assert "make install" in answer.json()["error"]["message"]
