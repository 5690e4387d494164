"""The app factory every service uses: lifespan, probes, /metrics, errors, tracing, latency."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager

from fastapi import APIRouter, FastAPI, Request, Response
from fastapi.responses import JSONResponse
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from libs.common.http.errors import install_error_handlers
from libs.common.observability.metrics import HTTP_LATENCY
from libs.common.runtime import ServiceRuntime

__all__ = ["create_service_app"]


def create_service_app(
    *,
    runtime: ServiceRuntime,
    title: str,
    description: str,
    routers: Sequence[APIRouter] = (),
    version: str = "0.1.0",
) -> FastAPI:
    """A FastAPI app whose lifespan starts and stops the runtime, with /healthz, /readyz and /metrics."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await runtime.start()
        try:
            yield
        finally:
            await runtime.stop()

    app = FastAPI(title=title, description=description, version=version, lifespan=lifespan)
    app.state.runtime = runtime
    install_error_handlers(app)
    app.middleware("http")(_latency_middleware(runtime.settings.service_name))
    app.include_router(_probes(runtime))
    for router in routers:
        app.include_router(router)
    FastAPIInstrumentor.instrument_app(app, excluded_urls="healthz,readyz,metrics")
    return app


def _probes(runtime: ServiceRuntime) -> APIRouter:
    router = APIRouter(tags=["operations"])

    @router.get("/healthz", summary="The process is alive")
    async def healthz() -> dict[str, str]:
        return {"status": "ok", "service": runtime.settings.service_name}

    @router.get("/readyz", summary="Kafka, Postgres and Redis are reachable")
    async def readyz() -> JSONResponse:
        checks = await runtime.readiness()
        ready = all(v == "ok" for v in checks.values())
        body = {"status": "ready" if ready else "not_ready", "checks": checks}
        return JSONResponse(body, status_code=200 if ready else 503)

    @router.get("/metrics", summary="Prometheus exposition")
    async def metrics() -> Response:
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    return router


def _latency_middleware(
    service: str,
) -> Callable[[Request, Callable[[Request], Awaitable[Response]]], Awaitable[Response]]:
    async def record(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        started = time.perf_counter()
        response = await call_next(request)
        route = request.scope.get("route")
        path = getattr(route, "path", "unmatched")
        HTTP_LATENCY.labels(service, request.method, path, str(response.status_code)).observe(
            time.perf_counter() - started
        )
        return response

    return record
