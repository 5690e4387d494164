"""HTTP: the service app factory and the JSON error shape."""

from libs.common.http.app import create_service_app
from libs.common.http.errors import (
    ApiError,
    BadRequest,
    Conflict,
    Forbidden,
    NotFound,
    Unauthorized,
    Unprocessable,
    error_response,
    install_error_handlers,
)

__all__ = [
    "ApiError",
    "BadRequest",
    "Conflict",
    "Forbidden",
    "NotFound",
    "Unauthorized",
    "Unprocessable",
    "create_service_app",
    "error_response",
    "install_error_handlers",
]
