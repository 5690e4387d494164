from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from starlette.types import Message

from libs.common.http import RequestGuard, install_error_handlers
from services.billing.settings import BillingSettings

LIMIT = 1024


def _app(calls: list[str]) -> FastAPI:
    app = FastAPI()
    install_error_handlers(app)

    @app.post("/things")
    async def create(body: dict[str, Any]) -> dict[str, Any]:
        calls.append("create")
        return body

    @app.post("/batches")
    async def batch(body: dict[str, Any]) -> dict[str, int]:
        calls.append("batch")
        return {"size": len(body["a"])}

    @app.get("/projects/{project}/things")
    async def things(project: str, colour: str | None = None) -> dict[str, str | None]:
        calls.append("things")
        return {"project": project, "colour": colour}

    app.add_middleware(
        RequestGuard, max_body_bytes=LIMIT, routes=app.router.routes, larger={"/batches": 4 * LIMIT}
    )
    return app


@pytest.fixture
def calls() -> list[str]:
    return []


@pytest.fixture
def client(calls: list[str]) -> TestClient:
    return TestClient(_app(calls))


def _error(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["status"] == status
    return error


def test_a_body_over_the_limit_is_refused_with_413_before_the_route_runs(
    client: TestClient, calls: list[str]
) -> None:
    response = client.post("/things", content=b'{"a": "' + b"x" * LIMIT + b'"}')
    error = _error(response, 413)
    assert error["code"] == "payload_too_large"
    assert error["field"] == "body"
    assert error["details"] == {"limit_bytes": LIMIT}
    assert calls == []


def test_a_body_within_the_limit_reaches_the_route_whole(client: TestClient, calls: list[str]) -> None:
    body = {"a": "x" * (LIMIT - 20)}
    response = client.post("/things", json=body)
    assert response.status_code == 200, response.text
    assert response.json() == body
    assert calls == ["create"]


def _scope(
    method: str, path: str, *, query: bytes = b"", headers: list[tuple[bytes, bytes]]
) -> dict[str, Any]:
    """An HTTP scope as uvicorn builds it: ``path`` percent-decoded once (test clients decode twice)."""
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": query,
        "headers": headers,
        "client": ("127.0.0.1", 1),
        "server": ("service", 80),
    }


async def _call(app: FastAPI, scope: dict[str, Any], receive: Any) -> list[Message]:
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return sent


async def test_a_chunked_body_is_abandoned_at_the_limit_without_reading_the_rest(calls: list[str]) -> None:
    """An endless body with no Content-Length: the guard stops reading once past the limit."""
    read = 0

    async def receive() -> Message:
        nonlocal read
        read += 1
        return {"type": "http.request", "body": b"x" * 100, "more_body": True}

    headers = [(b"transfer-encoding", b"chunked"), (b"content-type", b"application/json")]
    sent = await _call(_app(calls), _scope("POST", "/things", headers=headers), receive)
    assert sent[0]["type"] == "http.response.start"
    assert sent[0]["status"] == 413
    assert read == LIMIT // 100 + 1
    assert calls == []


def test_a_nul_in_a_path_parameter_is_422_naming_the_parameter(client: TestClient, calls: list[str]) -> None:
    error = _error(client.get("/projects/a%00b/things"), 422)
    assert error["code"] == "validation_error"
    assert error["field"] == "project"
    assert "NUL" in error["message"]
    assert calls == []


def test_a_nul_in_a_query_parameter_is_422_naming_the_parameter(client: TestClient, calls: list[str]) -> None:
    error = _error(client.get("/projects/p/things?colour=red%00"), 422)
    assert error["field"] == "colour"
    assert error["details"] == [{"field": "colour", "message": error["message"].removeprefix("colour: ")}]
    assert calls == []


def test_a_nul_in_a_json_string_is_422_naming_the_field(client: TestClient, calls: list[str]) -> None:
    nested = b'{"spec": {"tags": {"team": "a\\u0000b"}, "args": ["ok", "x\\u0000"]}}'
    error = _error(client.post("/things", content=nested, headers={"content-type": "application/json"}), 422)
    assert error["field"] == "spec.tags.team"
    listed = b'{"args": ["ok", "x\\u0000"]}'
    error = _error(client.post("/things", content=listed, headers={"content-type": "application/json"}), 422)
    assert error["field"] == "args.1"
    assert calls == []


def test_a_nul_in_a_json_key_is_422_naming_the_key(client: TestClient, calls: list[str]) -> None:
    body = b'{"tags": {"te\\u0000am": "x"}}'
    error = _error(client.post("/things", content=body, headers={"content-type": "application/json"}), 422)
    assert error["field"] == "tags.te\\u0000am"
    assert calls == []


def test_a_raw_nul_byte_in_a_body_is_422_naming_the_body(client: TestClient, calls: list[str]) -> None:
    error = _error(client.post("/things", content=b'{"a": "b\x00"}'), 422)
    assert error["field"] == "body"
    assert calls == []


def test_an_escaped_backslash_before_u0000_is_not_a_nul(client: TestClient, calls: list[str]) -> None:
    body = b'{"a": "C:\\\\u0000"}'  # the string C:\u0000, six characters after the colon, no NUL
    response = client.post("/things", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 200, response.text
    assert response.json() == {"a": "C:\\u0000"}
    assert calls == ["create"]


async def test_requests_without_a_nul_pass_untouched(calls: list[str]) -> None:
    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    scope = _scope("GET", "/projects/p%00/things", query=b"colour=%2500", headers=[])
    sent = await _call(_app(calls), scope, receive)
    assert sent[0]["status"] == 200
    assert json.loads(sent[1]["body"]) == {"project": "p%00", "colour": "%00"}
    assert calls == ["things"]


def test_the_limit_is_one_mebibyte_unless_a_service_sets_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    assert BillingSettings().max_request_bytes == 1024 * 1024
    monkeypatch.setenv("BILLING_MAX_REQUEST_BYTES", "4096")
    assert BillingSettings().max_request_bytes == 4096


def test_a_path_allowed_a_larger_body_takes_it_and_no_more_while_the_others_keep_the_limit(
    client: TestClient, calls: list[str]
) -> None:
    body = b'{"a": "' + b"x" * (2 * LIMIT) + b'"}'
    json_type = {"content-type": "application/json"}
    assert client.post("/batches", content=body, headers=json_type).json() == {"size": 2 * LIMIT}
    assert _error(client.post("/things", content=body), 413)["details"] == {"limit_bytes": LIMIT}
    over = b'{"a": "' + b"x" * (4 * LIMIT) + b'"}'
    assert _error(client.post("/batches", content=over), 413)["details"] == {"limit_bytes": 4 * LIMIT}
    assert calls == ["batch"]
