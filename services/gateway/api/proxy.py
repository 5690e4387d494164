"""/api/<service>/<path>: a browser's request sent on to a service with the session's key, streamed."""

from __future__ import annotations

from collections.abc import AsyncIterator

from fastapi import APIRouter, Request, Response
from starlette.background import BackgroundTask
from starlette.responses import StreamingResponse

from libs.common.http.errors import NotFound, error_responses
from services.gateway.adapters.upstream import UpstreamDown, UpstreamResponse
from services.gateway.api.access import Authenticated, clear_cookies, context_of
from services.gateway.api.errors import BadGateway, PayloadTooLarge
from services.gateway.domain.headers import request_headers, response_headers
from services.gateway.service.metrics import PROXIED

__all__ = ["router"]

router = APIRouter(tags=["proxy"])
_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


class _TooLarge(Exception):
    """The body passed the limit while streaming."""


@router.api_route(
    "/api/{service}/{path:path}",
    methods=_METHODS,
    responses=error_responses(401, 403, 404, 413),
    include_in_schema=False,
)
async def proxy(service: str, path: str, request: Request, current: Authenticated) -> Response:
    context = context_of(request)
    if not context.upstreams.knows(service):
        raise NotFound(f"service: no service {service!r} behind /api", field="service")
    limit = context.web.max_request_bytes
    _refuse_declared_size(request, limit)
    try:
        upstream = await context.upstreams.open(
            service=service,
            method=request.method,
            path=path,
            query=request.url.query,
            headers=request_headers(request.headers.items(), api_key=current.session.api_key),
            body=_body(request, limit) if _has_body(request) else None,
        )
    except UpstreamDown as exc:
        raise BadGateway(f"service: {service} is unreachable ({exc.reason})", field="service") from exc
    except _TooLarge as exc:
        raise _too_large(limit) from exc
    PROXIED.labels(service, str(upstream.status)).inc()
    response = _streamed(upstream)
    if upstream.status == 401 and await context.sessions.confirm_refused(current.token, current.session):
        clear_cookies(response, secure=context.web.secure_cookies)
    return response


def _streamed(upstream: UpstreamResponse) -> StreamingResponse:
    response = StreamingResponse(
        upstream.body, status_code=upstream.status, background=BackgroundTask(upstream.close)
    )
    response.raw_headers.extend(
        (name.lower().encode("latin-1"), value.encode("latin-1"))
        for name, value in response_headers(upstream.headers)
    )
    return response


def _has_body(request: Request) -> bool:
    headers = request.headers
    return "transfer-encoding" in headers or int(headers.get("content-length") or 0) > 0


def _refuse_declared_size(request: Request, limit: int) -> None:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)


def _too_large(limit: int) -> PayloadTooLarge:
    return PayloadTooLarge(
        f"body: the request body is larger than the limit of {limit} bytes",
        field="body",
        details={"limit_bytes": limit},
    )


async def _body(request: Request, limit: int) -> AsyncIterator[bytes]:
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _TooLarge
        yield chunk
