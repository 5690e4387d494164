"""The error shape the documents declare is what the services answer, a refused unknown field included.

Requests go to an app that is never started: the refusals here happen before any store is reached
(validation, the key check with the admin key, the edge guard).
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from libs.common.http.errors import ErrorBody
from services.scheduler.app import create_app


@pytest.fixture(scope="module")
def app() -> FastAPI:
    return create_app()


@pytest.fixture(scope="module")
def admin(app: FastAPI) -> dict[str, str]:
    return {"X-API-Key": app.state.runtime.settings.admin_key}


def _documented(app: FastAPI, response: httpx.Response) -> dict[str, Any]:
    """The error of ``response``, checked against the ErrorBody component of the app's document."""
    body: dict[str, Any] = response.json()
    ErrorBody.model_validate(body)
    component = app.openapi()["components"]["schemas"]["ErrorInfo"]
    assert set(body) == {"error"}
    assert set(body["error"]) == set(component["properties"])
    assert body["error"]["status"] == response.status_code
    error: dict[str, Any] = body["error"]
    return error


def test_a_validation_error_is_answered_in_the_documented_shape(app: FastAPI, admin: dict[str, str]) -> None:
    response = TestClient(app).get("/v1/workloads?limit=0", headers=admin)
    assert response.status_code == 422
    error = _documented(app, response)
    assert (error["code"], error["field"]) == ("validation_error", "limit")
    assert error["details"] == [{"field": "limit", "message": "Input should be greater than or equal to 1"}]


def test_missing_key_unknown_path_and_oversized_body_use_the_same_shape(app: FastAPI) -> None:
    client = TestClient(app)
    unauthorized = client.get("/v1/workloads")
    assert (unauthorized.status_code, _documented(app, unauthorized)["code"]) == (401, "unauthorized")
    missing = client.get("/v1/nowhere")
    assert (missing.status_code, _documented(app, missing)["code"]) == (404, "not_found")
    limit = app.state.runtime.settings.max_request_bytes
    too_large = client.post("/v1/workloads", content=b"x" * (limit + 1))
    assert (too_large.status_code, _documented(app, too_large)["field"]) == (413, "body")


def test_an_unknown_body_field_is_refused_naming_it(app: FastAPI, admin: dict[str, str]) -> None:
    tenant = {"tenant_id": "acme", "name": "Acme", "colour": "red"}
    response = TestClient(app).post("/v1/admin/tenants", json=tenant, headers=admin)
    assert response.status_code == 422
    error = _documented(app, response)
    assert error["field"] == "colour"
    assert error["message"] == "colour: unknown field 'colour'"
    assert error["details"] == [{"field": "colour", "message": "unknown field 'colour'"}]


def test_an_unknown_nested_field_is_named_by_its_path(app: FastAPI, admin: dict[str, str]) -> None:
    draft = {"options": {"urgency": 0.5, "colour": "red"}}
    response = TestClient(app).post("/v1/workloads/drafts?tenant_id=acme", json=draft, headers=admin)
    assert response.status_code == 422
    error = _documented(app, response)
    assert error["field"] == "options.colour"
    assert error["message"] == "options.colour: unknown field 'colour'"
