"""Every service's OpenAPI document says what the service does: typed bodies, the key, the real errors.

The documents are built from the apps as the services build them (``create_app()``), never started.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Callable, Iterator
from typing import Annotated, Any

import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute, iter_route_contexts
from pydantic import BaseModel, TypeAdapter, ValidationError

from libs.common.http.app import API_KEY_SCHEME, DocumentedBody
from services.alerting.app import create_app as alerting
from services.billing.app import create_app as billing
from services.inventory.app import create_app as inventory
from services.recovery.app import create_app as recovery
from services.scheduler.app import create_app as scheduler
from services.telemetry.app import create_app as telemetry

SERVICES: dict[str, Callable[[], FastAPI]] = {
    "alerting": alerting,
    "billing": billing,
    "inventory": inventory,
    "recovery": recovery,
    "scheduler": scheduler,
    "telemetry": telemetry,
}
PUBLIC = frozenset({"/healthz", "/readyz", "/metrics"})
_METHODS = frozenset({"get", "put", "post", "delete", "patch"})
_UNTYPED = {"type": "object", "additionalProperties": True}
_UNKNOWN = "zz_not_a_field"


@pytest.fixture(scope="module")
def apps() -> dict[str, FastAPI]:
    return {name: build() for name, build in SERVICES.items()}


def _operations(document: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if method in _METHODS:
                yield path, method, operation


def _all_operations(apps: dict[str, FastAPI]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for name, app in apps.items():
        for path, method, operation in _operations(app.openapi()):
            yield f"{name} {method.upper()} {path}", path, operation


def test_every_request_body_has_a_typed_schema(apps: dict[str, FastAPI]) -> None:
    bodies = 0
    for where, _, operation in _all_operations(apps):
        if "requestBody" not in operation:
            continue
        bodies += 1
        for media, content in operation["requestBody"]["content"].items():
            schema = {k: v for k, v in content.get("schema", {}).items() if k not in ("title", "description")}
            assert schema, f"{where}: {media} body has no schema"
            assert schema != _UNTYPED, f"{where}: {media} body is an untyped object"
    assert bodies > 20


@pytest.mark.parametrize(
    ("service", "method", "path", "documented"),
    [
        ("scheduler", "post", "/v1/workloads", ["#/components/schemas/CreationSpec"]),
        (
            "scheduler",
            "put",
            "/v1/workloads/drafts/{draft_id}/{step}",
            ["ImageStep", "GpuRequest", "MigRequest", "UnitsRequest", "NetworkStep"],
        ),
        ("scheduler", "post", "/v1/workloads/drafts", ["#/components/schemas/DraftIn"]),
        ("alerting", "post", "/v1/rules/import", ["application/yaml"]),
        ("inventory", "post", "/v1/admin/fleet", ["application/yaml"]),
    ],
)
def test_bodies_a_route_parses_itself_are_documented_as_what_it_reads(
    apps: dict[str, FastAPI], service: str, method: str, path: str, documented: list[str]
) -> None:
    document = apps[service].openapi()
    body = json.dumps(document["paths"][path][method]["requestBody"])
    for name in documented:
        assert name in body
    for ref in (r for r in documented if r.startswith("#/components/schemas/")):
        assert ref.rsplit("/", 1)[1] in document["components"]["schemas"]


def test_the_draft_step_names_its_three_steps(apps: dict[str, FastAPI]) -> None:
    operation = apps["scheduler"].openapi()["paths"]["/v1/workloads/drafts/{draft_id}/{step}"]["put"]
    step = next(p for p in operation["parameters"] if p["name"] == "step")
    assert step["schema"]["enum"] == ["image", "resources", "network"]


def test_every_operation_but_the_probes_declares_the_api_key(apps: dict[str, FastAPI]) -> None:
    for name, app in apps.items():
        document = app.openapi()
        scheme = document["components"]["securitySchemes"][API_KEY_SCHEME]
        assert (scheme["type"], scheme["in"], scheme["name"]) == ("apiKey", "header", "X-API-Key"), name
        for where, path, operation in _all_operations({name: app}):
            if path in PUBLIC:
                assert "security" not in operation, where
                continue
            assert {API_KEY_SCHEME: []} in operation.get("security", []), f"{where} declares no API key"
            assert {"401", "503"} <= set(operation["responses"]), where


def test_admin_operations_document_403(apps: dict[str, FastAPI]) -> None:
    for where, path, operation in _all_operations(apps):
        if "/admin/" in path:
            assert "403" in operation["responses"], where


def test_no_document_mentions_fastapis_validation_error(apps: dict[str, FastAPI]) -> None:
    for name, app in apps.items():
        text = json.dumps(app.openapi())
        assert "HTTPValidationError" not in text, name
        assert '"#/components/schemas/ValidationError"' not in text, name


def test_every_error_response_is_the_error_shape(apps: dict[str, FastAPI]) -> None:
    for where, path, operation in _all_operations(apps):
        for status, response in operation["responses"].items():
            if int(status) < 400 or path == "/readyz":
                continue
            if path.startswith("/api/v2/") and status in ("400", "404"):
                # Alertmanager's API (amtool's) answers these as a JSON string naming the problem.
                assert response["content"]["application/json"]["schema"] == {"type": "string"}, where
                continue
            schema = response["content"]["application/json"]["schema"]
            assert schema == {"$ref": "#/components/schemas/ErrorBody"}, f"{where} {status}"
    for app in apps.values():
        schemas = app.openapi()["components"]["schemas"]
        assert set(schemas["ErrorInfo"]["properties"]) == {"status", "code", "message", "field", "details"}


def test_operations_with_parameters_or_a_body_document_422_and_bodies_413(apps: dict[str, FastAPI]) -> None:
    for where, _, operation in _all_operations(apps):
        if operation.get("parameters") or "requestBody" in operation:
            assert "422" in operation["responses"], where
        if "requestBody" in operation:
            assert "413" in operation["responses"], where


def _refuses_unknown_fields(node: Any) -> bool:
    try:
        TypeAdapter(node).validate_python({_UNKNOWN: 1})
    except ValidationError as exc:
        return any(e["type"] == "extra_forbidden" and e["loc"][-1] == _UNKNOWN for e in exc.errors())
    return False


def _annotated(annotation: Any, metadata: list[Any]) -> Any:
    return Annotated[annotation, *metadata] if metadata else annotation


def _field_types(model: type[BaseModel]) -> Iterator[Any]:
    for info in model.model_fields.values():
        yield _annotated(info.annotation, info.metadata)


def _lenient_models(node: Any, seen: set[Any]) -> Iterator[str]:
    """Models a request body reaches that would drop an unknown field (a strict reader wrapping one
    covers what it reads, however deep)."""
    if node in seen:
        return
    seen.add(node)
    origin, args = typing.get_origin(node), typing.get_args(node)
    model = args[0] if origin is Annotated else node
    if isinstance(model, type) and issubclass(model, BaseModel):
        if not _refuses_unknown_fields(node):
            yield f"{model.__module__}.{model.__qualname__}"
        elif model.model_config.get("extra") == "forbid":
            for field in _field_types(model):
                yield from _lenient_models(field, seen)
    elif origin is Annotated:
        yield from _lenient_models(args[0], seen)
    elif origin is not typing.Literal:
        for arg in args:
            yield from _lenient_models(arg, seen)


def test_every_request_body_refuses_unknown_fields_at_every_depth(apps: dict[str, FastAPI]) -> None:
    lenient: set[str] = set()
    for name, app in apps.items():
        for route in iter_route_contexts(app.routes):
            if not isinstance(route.original_route, APIRoute):
                continue
            for param in route.dependant.body_params:
                info = param.field_info
                documented = [m.shape for m in info.metadata if isinstance(m, DocumentedBody)]
                node = documented[0] if documented else _annotated(info.annotation, info.metadata)
                lenient |= {f"{name} {route.path}: {m}" for m in _lenient_models(node, set())}
    assert not lenient, "\n".join(sorted(lenient))
