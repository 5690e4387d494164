"""/healthz, /readyz (Redis answers) and /metrics (with process CPU)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import APIRouter
from fastapi.responses import JSONResponse, PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.responses import Response

__all__ = ["probes"]


def probes(*, service: str, checks: dict[str, Callable[[], Awaitable[None]]]) -> APIRouter:
    """The operations routes; each check raises when its dependency does not answer."""
    router = APIRouter(tags=["operations"])

    @router.get("/healthz", summary="The process is alive")
    async def healthz() -> dict[str, str]:
        return {"status": "ok", "service": service}

    @router.get("/readyz", summary="Redis answers")
    async def readyz() -> JSONResponse:
        results: dict[str, str] = {}
        for name, check in checks.items():
            try:
                await check()
                results[name] = "ok"
            except Exception as exc:
                results[name] = f"{type(exc).__name__}: {exc}"[:200]
        ready = all(v == "ok" for v in results.values())
        body = {"status": "ready" if ready else "not_ready", "checks": results}
        return JSONResponse(body, status_code=200 if ready else 503)

    @router.get("/metrics", summary="Prometheus exposition", response_class=PlainTextResponse)
    async def metrics() -> Response:
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    return router
