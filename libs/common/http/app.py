"""The app factory every service uses: lifespan, probes, /metrics, errors, tracing, latency."""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from types import FrameType
from typing import TYPE_CHECKING

from fastapi import APIRouter, FastAPI, Response
from fastapi.responses import JSONResponse
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from libs.common.heap import freeze_startup_heap
from libs.common.http.errors import install_error_handlers
from libs.common.observability.metrics import HTTP_LATENCY
from libs.common.observability.tracing import flush_tracing

if TYPE_CHECKING:  # the runtime imports auth, which imports this package's errors
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

    app = FastAPI(title=title, description=description, version=version, lifespan=lifespan)
    app.state.runtime = runtime
    install_error_handlers(app)
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
