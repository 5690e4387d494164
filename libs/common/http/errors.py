"""One JSON error shape for every service: {"error": {"status", "code", "message", "field", "details"}}."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import asyncpg
import redis.exceptions
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

__all__ = [
    "ERROR_DESCRIPTIONS",
    "UNAVAILABLE_ERRORS",
    "ApiError",
    "BadRequest",
    "Conflict",
    "ErrorBody",
    "ErrorInfo",
    "FieldProblem",
    "Forbidden",
    "NotFound",
    "Unauthorized",
    "Unprocessable",
    "error_response",
    "error_responses",
    "install_error_handlers",
]


class ApiError(Exception):
    """An error the API reports to its caller; subclasses fix the status and code."""

    status = 400
    code = "bad_request"

    def __init__(self, message: str, *, field: str | None = None, details: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.details = details


class BadRequest(ApiError):
    """The request cannot be processed as sent."""


class Unauthorized(ApiError):
    """No valid API key."""

    status, code = 401, "unauthorized"


class Forbidden(ApiError):
    """The key is valid but may not do this."""

    status, code = 403, "forbidden"


class NotFound(ApiError):
    """No such resource (or not visible to this tenant)."""

    status, code = 404, "not_found"


class Conflict(ApiError):
    """The request conflicts with the current state."""

    status, code = 409, "conflict"


class Unprocessable(ApiError):
    """A field is well-formed but not acceptable."""

    status, code = 422, "validation_error"


#: What a request meets when a backing store cannot be reached: a refused or reset connection, a timeout
#: (the pool's acquire included; TimeoutError is an OSError), Postgres refusing or shutting down
#: connections, Redis unreachable. Answered 503 with ``Retry-After``: retrying later is the fix.
UNAVAILABLE_ERRORS: tuple[type[Exception], ...] = (
    OSError,
    asyncpg.PostgresConnectionError,
    asyncpg.CannotConnectNowError,
    asyncpg.TooManyConnectionsError,
    asyncpg.AdminShutdownError,
    asyncpg.CrashShutdownError,
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
)
RETRY_AFTER_S = 2
log = logging.getLogger(__name__)


class FieldProblem(BaseModel):
    """One refused input of a request: where it is and what is wrong with it."""

    field: str | None = Field(description="Dotted path of the input (a body field has no 'body.' prefix).")
    message: str


class ErrorInfo(BaseModel):
    """What went wrong, for programs (status, code, field) and for people (message)."""

    status: int = Field(description="The HTTP status, repeated.")
    code: str = Field(
        description="Stable, machine-readable: bad_request, unauthorized, forbidden, not_found, conflict, "
        "payload_too_large, validation_error, quota_exhausted, service_unavailable, ..."
    )
    message: str = Field(description="For people; starts with the field when there is one.")
    field: str | None = Field(description="The input the error is about, as a dotted path, or null.")
    details: Any = Field(
        default=None,
        description="A validation error's every problem as a list of {field, message}; "
        "otherwise what the code carries (limits, the unreachable store), or null.",
    )


class ErrorBody(BaseModel):
    """The body of every error the services answer: ``{"error": {status, code, message, field, details}}``."""

    error: ErrorInfo


#: What each error status means, as the OpenAPI documents of every service describe it.
ERROR_DESCRIPTIONS: Mapping[int, str] = {
    400: "The request cannot be processed as sent.",
    401: "No valid API key: send 'X-API-Key: <key>' or 'Authorization: Bearer <key>'.",
    403: "The key is valid but may not do this: an admin-only operation, or another tenant's data.",
    404: "No such resource, or none this key may see.",
    409: "The request conflicts with the current state.",
    413: "The request body is larger than the service accepts.",
    422: "A field is missing, malformed, unknown or not acceptable; `field` names it.",
    429: "A quota is in use now; retry once something finishes.",
    503: "A database or cache the service needs is unreachable; retry after `Retry-After` seconds.",
}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """A route's ``responses=``: the error statuses it answers beyond those the app documents itself.

    The app documents 401/403/503 (from the route's key dependency), 422 (parameters) and 413 (a body);
    a route names what its own logic answers (404, 409, 429, a tenant's 403). The body of each is ErrorBody.
    """
    return {status: {"description": ERROR_DESCRIPTIONS[status]} for status in statuses}


def error_response(
    status: int, code: str, message: str, *, field: str | None = None, details: Any = None
) -> JSONResponse:
    """The JSON error body every service returns."""
    body = {"status": status, "code": code, "message": message, "field": field, "details": details}
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    if status == 503:
        headers = {"Retry-After": str(RETRY_AFTER_S)}
    return JSONResponse({"error": body}, status_code=status, headers=headers)


def _field_path(loc: tuple[Any, ...] | list[Any]) -> str:
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header")]
    return ".".join(parts) or ".".join(str(p) for p in loc)


def _problem(error: Mapping[str, Any]) -> dict[str, Any]:
    """One validation error as {field, message}; an unknown field is named, not 'extra inputs'."""
    field = _field_path(error["loc"])
    if error["type"] == "extra_forbidden":
        return {"field": field, "message": f"unknown field {str(error['loc'][-1])!r}"}
    return {"field": field, "message": error["msg"]}


async def _on_validation(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [_problem(e) for e in exc.errors()]
    first = errors[0] if errors else {"field": None, "message": "invalid request"}
    return error_response(
        422, "validation_error", f"{first['field']}: {first['message']}", field=first["field"], details=errors
    )


async def _on_api_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return error_response(exc.status, exc.code, exc.message, field=exc.field, details=exc.details)


#: What FastAPI raises (a bare 400) for a body it cannot decode at all, such as bytes that are not UTF-8.
_UNPARSABLE_BODY = "There was an error parsing the body"


async def _on_http(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 400 and exc.detail == _UNPARSABLE_BODY:
        message = "body: not a JSON document (the body must be UTF-8 JSON)"
        problem = {"field": "body", "message": "not a JSON document (the body must be UTF-8 JSON)"}
        return error_response(422, "validation_error", message, field="body", details=[problem])
    code = {
        401: "unauthorized",
        403: "forbidden",
        404: "not_found",
        405: "method_not_allowed",
        409: "conflict",
        413: "payload_too_large",
        503: "service_unavailable",
    }
    return error_response(exc.status_code, code.get(exc.status_code, "http_error"), str(exc.detail))


async def _on_unavailable(request: Request, exc: Exception) -> JSONResponse:
    log.warning(
        "%s %s: a backing store is unreachable: %s: %s",
        request.method,
        request.url.path,
        type(exc).__name__,
        exc,
    )
    return error_response(
        503,
        "service_unavailable",
        f"a database or cache this service needs is unreachable; retry in {RETRY_AFTER_S} s",
        details={"error": type(exc).__name__},
    )


def install_error_handlers(app: FastAPI) -> None:
    """Map validation errors, ApiErrors, HTTP exceptions and unreachable stores (503) to the JSON shape."""
    app.add_exception_handler(RequestValidationError, _on_validation)
    app.add_exception_handler(ApiError, _on_api_error)
    app.add_exception_handler(StarletteHTTPException, _on_http)
    for error in UNAVAILABLE_ERRORS:
        app.add_exception_handler(error, _on_unavailable)
