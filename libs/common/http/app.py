"""The app factory every service uses: lifespan, probes, /metrics, errors, input guard, tracing, latency,
and an OpenAPI document that shows the error shape the services answer and the API key they need."""

from __future__ import annotations

import asyncio
import copy
import json
import signal
import threading
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import cache
from types import FrameType
from typing import TYPE_CHECKING, Any, Literal, cast

from fastapi import APIRouter, Depends, FastAPI, Response
from fastapi.responses import JSONResponse, PlainTextResponse
from fastapi.routing import APIRoute, iter_route_contexts
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, Field, GetJsonSchemaHandler, TypeAdapter
from pydantic.json_schema import JsonSchemaValue, models_json_schema
from pydantic_core import CoreSchema, core_schema
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from libs.common.heap import freeze_startup_heap
from libs.common.http.errors import ERROR_DESCRIPTIONS, RETRY_AFTER_S, ErrorBody, install_error_handlers
from libs.common.http.guard import RequestGuard
from libs.common.http.ratelimit import install_rate_limit
from libs.common.http.routes import dependency_calls
from libs.common.observability.metrics import HTTP_LATENCY, TENANT_REGISTRY
from libs.common.observability.tracing import flush_tracing

if TYPE_CHECKING:  # the runtime imports auth, which imports this package's errors
    from libs.common.runtime import ServiceRuntime

__all__ = ["API_KEY_SCHEME", "DocumentedBody", "create_service_app"]


def create_service_app(
    *,
    runtime: ServiceRuntime,
    title: str,
    description: str,
    routers: Sequence[APIRouter] = (),
    version: str = "0.1.0",
    larger_bodies: Mapping[str, int] | None = None,
) -> FastAPI:
    """A FastAPI app whose lifespan starts and stops the runtime, with /healthz, /readyz and /metrics.

    ``larger_bodies``: path -> body limit for the few paths that take more than the settings'
    ``max_request_bytes`` (RequestGuard)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            await _start_unless_terminated(runtime)
        except BaseException:
            await runtime.stop(timeout_s=2.0)  # whatever the start had opened
            raise
        freeze_startup_heap()
        try:
            yield
        finally:
            try:
                await runtime.stop()
            finally:
                await asyncio.to_thread(flush_tracing)  # the process may die right after (SIGTERM)

    app = _ServiceApp(title=title, description=description, version=version, lifespan=lifespan)
    app.state.runtime = runtime
    install_error_handlers(app)
    install_rate_limit(app, runtime)  # before the routers: each route they add checks it first
    # Inside the latency middleware, so a refused request is measured like any other.
    app.add_middleware(
        RequestGuard,
        max_body_bytes=runtime.settings.max_request_bytes,
        routes=app.router.routes,
        larger=larger_bodies,
    )
    app.add_middleware(_LatencyMiddleware, service=runtime.settings.service_name)
    app.include_router(_probes(runtime))
    for router in routers:
        app.include_router(router)
    # One server span per request; the ASGI receive/send sub-spans (two more per request) add nothing a
    # reader of the trace uses.
    FastAPIInstrumentor.instrument_app(
        app, excluded_urls="healthz,readyz,metrics", exclude_spans=["receive", "send"]
    )
    return app


async def _start_unless_terminated(runtime: ServiceRuntime) -> None:
    """``runtime.start()``, abandoned as soon as SIGTERM or SIGINT arrives.

    Start-up waits for its dependencies (the broker for up to 30 s); the server only looks at a signal
    once start-up is over, so an orchestrator stopping a service whose broker is down had to wait that
    out or SIGKILL it. The server's own handlers still run (it then exits instead of serving).
    """
    if threading.current_thread() is not threading.main_thread():
        await runtime.start()
        return
    loop, starting = asyncio.get_running_loop(), asyncio.current_task()
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}

    def on_signal(sig: int, frame: FrameType | None) -> None:
        if starting is not None:
            loop.call_soon_threadsafe(starting.cancel)
        handler = previous[signal.Signals(sig)]
        if callable(handler):
            handler(sig, frame)

    for sig in previous:
        signal.signal(sig, on_signal)
    try:
        await runtime.start()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class Readiness(BaseModel):
    """What /readyz answers, ready (200) or not (503)."""

    status: Literal["ready", "not_ready"]
    checks: dict[str, str] = Field(description="Each dependency: 'ok' or what went wrong.")


def _probes(runtime: ServiceRuntime) -> APIRouter:
    router = APIRouter(tags=["operations"])

    @router.get("/healthz", summary="The process is alive")
    async def healthz() -> dict[str, str]:
        return {"status": "ok", "service": runtime.settings.service_name}

    @router.get(
        "/readyz",
        summary="Kafka, Postgres and Redis are reachable",
        responses={
            200: {"model": Readiness, "description": "Every dependency answered."},
            503: {"model": Readiness, "description": "Not ready: `checks` says which dependency failed."},
        },
    )
    async def readyz() -> JSONResponse:
        checks = await runtime.readiness()
        ready = all(v == "ok" for v in checks.values())
        body = {"status": "ready" if ready else "not_ready", "checks": checks}
        return JSONResponse(body, status_code=200 if ready else 503)

    @router.get("/metrics", summary="Prometheus exposition", response_class=PlainTextResponse)
    async def metrics() -> Response:
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    # Imported here: libs.common.auth imports this package's errors module.
    from libs.common.auth.principal import require_admin

    @router.get(
        "/metrics/tenants",
        summary="Prometheus exposition of the metrics labelled by tenant (admin key)",
        response_class=PlainTextResponse,
        dependencies=[Depends(require_admin)],
    )
    async def tenant_metrics() -> Response:
        return Response(generate_latest(TENANT_REGISTRY), media_type=CONTENT_TYPE_LATEST)

    return router


class _LatencyMiddleware:
    """Observes each HTTP request's duration by method, route template and status (plain ASGI).

    Plain ASGI rather than ``app.middleware("http")``: Starlette's BaseHTTPMiddleware runs every request
    through an extra task and memory streams, a measurable cost on the hot submit path.
    """

    def __init__(self, app: ASGIApp, *, service: str) -> None:
        self._app = app
        self._service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self._app(scope, receive, send_status)
        finally:
            path = getattr(scope.get("route"), "path", "unmatched")
            HTTP_LATENCY.labels(self._service, scope["method"], path, str(status)).observe(
                time.perf_counter() - started
            )


# The OpenAPI document: the error shape every service answers, the API key, bodies a route parses itself.

#: The security scheme of every operation that needs a key (the same key also passes as a bearer token).
API_KEY_SCHEME = "ApiKey"
_SECURITY_SCHEMES: dict[str, Any] = {
    API_KEY_SCHEME: {
        "type": "apiKey",
        "in": "header",
        "name": "X-API-Key",
        "description": "A tenant's API key, or the admin key.",
    },
    "Bearer": {"type": "http", "scheme": "bearer", "description": "The same key as a bearer token."},
}
_SECURITY: list[dict[str, list[str]]] = [{API_KEY_SCHEME: []}, {"Bearer": []}]
_ERROR_CONTENT = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
_ERROR_HEADERS: dict[int, dict[str, Any]] = {
    401: {"WWW-Authenticate": {"description": "Bearer", "schema": {"type": "string"}}},
    503: {"Retry-After": {"description": f"{RETRY_AFTER_S} (seconds)", "schema": {"type": "integer"}}},
}
#: FastAPI's own 422 body, which no service answers (the error handler answers ErrorBody).
_FASTAPI_VALIDATION = ("HTTPValidationError", "ValidationError")


@dataclass(frozen=True, slots=True)
class DocumentedBody:
    """``Annotated`` metadata: a body the route parses itself (``dict[str, Any]``) documented as ``shape``.

    The route keeps its own validation and error messages; the OpenAPI document shows ``shape`` (a model
    or a union of models) through the same components as every other schema.
    """

    shape: Any

    def __get_pydantic_json_schema__(
        self, _schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return handler(_by_reference(TypeAdapter(self.shape).core_schema))


def _by_reference(schema: CoreSchema) -> CoreSchema:
    """A model's core schema as a reference to its definition, so the document names it as a component."""
    raw = cast("dict[str, Any]", schema)
    definitions: list[CoreSchema] = []
    if raw["type"] == "definitions":
        definitions, raw = list(raw["definitions"]), raw["schema"]
    top = cast(CoreSchema, raw)
    if "ref" in raw:
        reference = core_schema.definition_reference_schema(raw["ref"])
        return core_schema.definitions_schema(reference, [*definitions, top])
    return core_schema.definitions_schema(top, definitions) if definitions else top


class _ServiceApp(FastAPI):
    """A FastAPI app whose OpenAPI document says what the services answer: ErrorBody, and the API key."""

    _documented: dict[str, Any] | None = None

    def openapi(self) -> dict[str, Any]:
        document = super().openapi()
        if document is not self._documented:  # built anew: the first call, or the routes changed
            _document(document, routes=self.routes)
            self._documented = document
        return document


def _document(document: dict[str, Any], *, routes: Sequence[BaseRoute]) -> None:
    """Declare ErrorBody and the key schemes; document each operation's errors and security."""
    from libs.common.auth.principal import authenticate, require_admin  # auth imports this package

    components = document.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    schemas.update(copy.deepcopy(_error_schemas()))
    components["securitySchemes"] = copy.deepcopy(_SECURITY_SCHEMES)
    for route in iter_route_contexts(routes):
        if not isinstance(route.original_route, APIRoute) or not route.include_in_schema:
            continue
        calls = set(dependency_calls(route.dependant))
        for method in route.methods or ():
            operation = document["paths"].get(route.path_format, {}).get(method.lower())
            if operation is not None:
                _document_operation(operation, keyed=authenticate in calls, admin=require_admin in calls)
    for name in _FASTAPI_VALIDATION:  # HTTPValidationError first: it is what refers to ValidationError
        if name in schemas and f'"#/components/schemas/{name}"' not in json.dumps(document):
            del schemas[name]


def _document_operation(operation: dict[str, Any], *, keyed: bool, admin: bool) -> None:
    """The errors every route of this kind answers; each error response's body is ErrorBody."""
    statuses = ({401, 503} if keyed else set()) | ({403} if admin else set())
    if "requestBody" in operation:
        statuses.add(413)
    if keyed:
        operation["security"] = copy.deepcopy(_SECURITY)
    responses: dict[str, Any] = operation.setdefault("responses", {})
    for status in sorted(statuses):
        responses.setdefault(str(status), {"description": ERROR_DESCRIPTIONS[status]})
    for code, response in list(responses.items()):
        if not code.isdigit() or int(code) < 400:
            continue
        if "HTTPValidationError" in json.dumps(response):  # FastAPI's default 422
            response = responses[code] = {"description": ERROR_DESCRIPTIONS[int(code)]}
        if "content" not in response:
            response["content"] = copy.deepcopy(_ERROR_CONTENT)
            if int(code) in _ERROR_HEADERS:
                response.setdefault("headers", copy.deepcopy(_ERROR_HEADERS[int(code)]))
    operation["responses"] = dict(sorted(responses.items()))


@cache
def _error_schemas() -> dict[str, Any]:
    """ErrorBody and the models it refers to, as OpenAPI components."""
    _, schema = models_json_schema(
        [(ErrorBody, "serialization")], ref_template="#/components/schemas/{model}"
    )
    return dict(schema["$defs"])
