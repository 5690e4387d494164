"""One JSON error shape for every service: {"error": {"status", "code", "message", "field", "details"}}."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

__all__ = [
    "ApiError",
    "BadRequest",
    "Conflict",
    "Forbidden",
    "NotFound",
    "Unauthorized",
    "Unprocessable",
    "error_response",
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


def error_response(
    status: int, code: str, message: str, *, field: str | None = None, details: Any = None
) -> JSONResponse:
    """The JSON error body every service returns."""
    body = {"status": status, "code": code, "message": message, "field": field, "details": details}
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse({"error": body}, status_code=status, headers=headers)


def _field_path(loc: tuple[Any, ...] | list[Any]) -> str:
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header")]
    return ".".join(parts) or ".".join(str(p) for p in loc)


async def _on_validation(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [{"field": _field_path(e["loc"]), "message": e["msg"]} for e in exc.errors()]
    first = errors[0] if errors else {"field": None, "message": "invalid request"}
    return error_response(
        422, "validation_error", f"{first['field']}: {first['message']}", field=first["field"], details=errors
    )


async def _on_api_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return error_response(exc.status, exc.code, exc.message, field=exc.field, details=exc.details)


async def _on_http(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = {
        401: "unauthorized",
        403: "forbidden",
        404: "not_found",
        405: "method_not_allowed",
        409: "conflict",
    }
    return error_response(exc.status_code, code.get(exc.status_code, "http_error"), str(exc.detail))


def install_error_handlers(app: FastAPI) -> None:
    """Map validation errors, ApiErrors and HTTP exceptions to the JSON error shape."""
    app.add_exception_handler(RequestValidationError, _on_validation)
    app.add_exception_handler(ApiError, _on_api_error)
    app.add_exception_handler(StarletteHTTPException, _on_http)
