"""The rate limit in a service's app: the first dependency of every route, and the 429 in its OpenAPI."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute, iter_route_contexts
from starlette.routing import BaseRoute

from libs.common.http.errors import error_response
from libs.common.http.ratelimit._limiter import RateLimited, RateLimiter
from libs.common.http.routes import dependency_calls

if TYPE_CHECKING:  # the runtime imports auth, which imports this package's errors
    from libs.common.auth.principal import Principal
    from libs.common.runtime import ServiceRuntime

__all__ = ["install_rate_limit"]


async def _on_rate_limited(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RateLimited)
    response = error_response(exc.status, exc.code, exc.message, details=exc.details)
    response.headers["Retry-After"] = str(exc.retry_after_s)
    return response


def install_rate_limit(app: FastAPI, runtime: ServiceRuntime) -> None:
    """Check every keyed route's tenant against its rate limits first; call before including routers.

    The limiter lives on ``app.state.rate_limiter`` (a test may replace it). The OpenAPI document gains
    the 429 of every operation a tenant's key may call.
    """
    from libs.common.auth.principal import authenticate, require_admin  # auth imports this package

    app.state.rate_limiter = RateLimiter.of(runtime)
    app.add_exception_handler(RateLimited, _on_rate_limited)
    keyed: dict[int, tuple[object, bool]] = {}  # by id: routes compare by value and cannot be hashed

    def needs_key(route: object) -> bool:
        known = keyed.get(id(route))
        if known is None or known[0] is not route:
            calls = set(dependency_calls(route.dependant)) if isinstance(route, APIRoute) else set()
            known = keyed[id(route)] = (route, authenticate in calls)
        return known[1]

    async def rate_limit(request: Request) -> None:
        if not needs_key(request.scope.get("route")):
            return
        principal: Principal = await authenticate(request)  # a missing or bad key: the same 401 as the route
        if principal.is_admin or principal.tenant_id is None:
            return
        limiter: RateLimiter = request.app.state.rate_limiter
        await limiter.refuse_over_limit(tenant=principal.tenant_id, method=request.method)

    app.router.dependencies.append(Depends(rate_limit))
    documented = app.openapi

    def openapi() -> dict[str, Any]:
        document = documented()
        _document_429(document, app.routes, admin=require_admin, keyed=authenticate)
        return document

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented way to extend the document


_RETRY_AFTER_HEADER = {
    "Retry-After": {
        "description": "Seconds (rounded up) until the rate limit lets the next request through.",
        "schema": {"type": "integer"},
    }
}
_ERROR_CONTENT = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
_RATE_LIMITED_TEXT = (
    "Too many requests: the tenant's rate limit for this service (writes or reads) is spent; "
    "retry after `Retry-After` seconds (code `rate_limited`)."
)


def _document_429(document: dict[str, Any], routes: Sequence[BaseRoute], *, admin: Any, keyed: Any) -> None:
    """The 429 (and its Retry-After) of every operation a tenant's key may call; idempotent."""
    for route in iter_route_contexts(routes):
        if not isinstance(route.original_route, APIRoute) or not route.include_in_schema:
            continue
        calls = set(dependency_calls(route.dependant))
        if keyed not in calls or admin in calls:
            continue
        for method in route.methods or ():
            operation = document["paths"].get(route.path_format, {}).get(method.lower())
            if operation is not None:
                _document_operation(operation)


def _document_operation(operation: dict[str, Any]) -> None:
    responses: dict[str, Any] = operation.setdefault("responses", {})
    response = responses.setdefault("429", {"description": _RATE_LIMITED_TEXT})
    if _RATE_LIMITED_TEXT not in response["description"]:  # the route's own 429 (a quota), and this one
        response["description"] = f"{response['description']} Or: {_RATE_LIMITED_TEXT}"
    response.setdefault("content", copy.deepcopy(_ERROR_CONTENT))
    response.setdefault("headers", {}).update(copy.deepcopy(_RETRY_AFTER_HEADER))
    operation["responses"] = dict(sorted(responses.items()))
