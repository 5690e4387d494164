"""The edge guard on each of the six services as wired by its app: size, NUL and int64 refusals.

Every refusal here happens before a route touches a store, so the apps are not started: a request that got
past the edge would reach an unopened pool and fail, which is how these tests fail on unguarded code.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import iter_route_contexts

from services.inventory.api.admin import FLEET_PATH
from services.scheduler.api.arrays import ARRAYS_PATH
from tests.integration.support import ADMIN_HEADERS

SERVICES = ("inventory", "scheduler", "telemetry", "alerting", "billing", "recovery")
MIB = 1024 * 1024
TOO_BIG = 2**63  # one past the largest bigint


def _app(service: str) -> FastAPI:
    app: FastAPI = importlib.import_module(f"services.{service}.app").create_app()
    return app


def _paths(app: FastAPI, method: str) -> list[str]:
    return sorted(
        {c.path for c in iter_route_contexts(app.router.routes) if c.path and method in (c.methods or ())}
    )


#: The paths allowed a larger body than their service's max_request_bytes, and the setting that says how much.
LARGER = {FLEET_PATH: "max_fleet_request_bytes", ARRAYS_PATH: "max_array_request_bytes"}


def _body_path(app: FastAPI) -> str:
    """A route that takes a body at the service's limit (recovery has none: the guard answers before
    routing anyway)."""
    paths = [p for p in _paths(app, "POST") or _paths(app, "PUT") or ["/healthz"] if p not in LARGER]
    return re.sub(r"\{[^}]+\}", "x", paths[0])


@pytest.fixture
async def client(request: pytest.FixtureRequest) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    app = _app(request.param)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://service") as http:
        yield app, http


def _refusal(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["status"] == status
    return error


@pytest.mark.parametrize("client", SERVICES, indirect=True)
async def test_a_body_over_the_services_limit_is_refused_with_413_on_every_service(
    client: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    app, http = client
    path = _body_path(app)
    limit = app.state.runtime.settings.max_request_bytes  # 1 MiB: every path but those of LARGER
    body = b'{"tags": {"a": "' + b"x" * limit + b'"}}'
    response = await http.post(
        path, content=body, headers={**ADMIN_HEADERS, "content-type": "application/json"}
    )
    error = _refusal(response, 413)
    assert error["code"] == "payload_too_large"
    assert error["field"] == "body"


@pytest.mark.parametrize("client", ["inventory", "scheduler"], indirect=True)
async def test_the_fleet_file_and_job_array_paths_take_bodies_over_the_service_limit_up_to_their_own(
    client: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    app, http = client
    settings = app.state.runtime.settings
    path, setting = next((p, s) for p, s in LARGER.items() if p in _paths(app, "POST"))
    larger = getattr(settings, setting)
    assert larger > 2 * settings.max_request_bytes
    headers = {**ADMIN_HEADERS, "content-type": "application/json"}
    body = b'{"items": "' + b"x" * (2 * settings.max_request_bytes) + b'"}'
    assert (await http.post(path, content=body, headers=headers)).status_code != 413  # read, then judged
    over = b'{"items": "' + b"x" * larger + b'"}'
    assert _refusal(await http.post(path, content=over, headers=headers), 413)["details"] == {
        "limit_bytes": larger
    }


@pytest.mark.parametrize("client", SERVICES, indirect=True)
async def test_a_nul_in_a_path_parameter_is_422_naming_it_on_every_service(
    client: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    app, http = client
    template = next(p for p in _paths(app, "GET") if "{" in p)
    name = re.findall(r"\{([^}:]+)", template)[0]
    response = await http.get(re.sub(r"\{[^}]+\}", "a%00b", template), headers=ADMIN_HEADERS)
    error = _refusal(response, 422)
    assert error["field"] == name
    assert "NUL" in error["message"]


@pytest.mark.parametrize("client", SERVICES, indirect=True)
async def test_a_nul_in_the_query_or_a_json_string_is_422_naming_it_on_every_service(
    client: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    app, http = client
    query = await http.get("/healthz?tenant_id=acme%00", headers=ADMIN_HEADERS)
    assert _refusal(query, 422)["field"] == "tenant_id"
    path = _body_path(app)
    body = b'{"reason": "ok", "tags": {"team": "a\\u0000b"}}'
    posted = await http.post(
        path, content=body, headers={**ADMIN_HEADERS, "content-type": "application/json"}
    )
    assert _refusal(posted, 422)["field"] == "tags.team"


@pytest.mark.parametrize(
    ("service", "path"),
    [
        ("inventory", "/v1/nodes"),
        ("inventory", "/v1/gpus"),
        ("inventory", "/v1/partitions"),
        ("billing", "/v1/ledger/entries"),
        ("billing", "/v1/charges"),
        ("recovery", "/v1/incidents"),
    ],
)
async def test_an_offset_above_int64_is_422_naming_offset(service: str, path: str) -> None:
    app = _app(service)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://service") as http:
        response = await http.get(f"{path}?offset={TOO_BIG}", headers=ADMIN_HEADERS)
    error = _refusal(response, 422)
    assert error["field"] == "offset"


async def test_a_budget_limit_above_int64_is_422_naming_limit_micro() -> None:
    app = _app("billing")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://service") as http:
        response = await http.put(
            "/v1/budgets/vision", json={"tenant_id": "acme", "limit_micro": TOO_BIG}, headers=ADMIN_HEADERS
        )
    assert _refusal(response, 422)["field"] == "limit_micro"


@pytest.mark.parametrize("project", ["a%01%1bb", "%E2%80%AE%F0%9F%98%80", "a%20b"])
async def test_a_project_name_outside_the_safe_set_is_422_on_billing_paths(project: str) -> None:
    app = _app("billing")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://service") as http:
        for method, path, body in [
            ("GET", f"/v1/exports/{project}?tenant_id=acme", None),
            ("PUT", f"/v1/exports/{project}/schedule", {"tenant_id": "acme"}),
            ("PUT", f"/v1/budgets/{project}", {"tenant_id": "acme", "limit_micro": 5}),
            ("DELETE", f"/v1/budgets/{project}?tenant_id=acme", None),
        ]:
            response = await http.request(method, path, json=body, headers=ADMIN_HEADERS)
            error = _refusal(response, 422)
            assert error["field"] == "project", (method, path)
            assert "project name" in error["message"]
