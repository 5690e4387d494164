"""HTTP: the service app factory, the edge guard, the JSON error shape and the names callers choose."""

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
from libs.common.http.guard import RequestGuard
from libs.common.http.names import PROJECT_NAME_PATTERN, PROJECT_NAME_RULE, valid_project_name
from libs.common.http.params import BIGINT_MAX, Offset

__all__ = [
    "BIGINT_MAX",
    "PROJECT_NAME_PATTERN",
    "PROJECT_NAME_RULE",
    "ApiError",
    "BadRequest",
    "Conflict",
    "Forbidden",
    "NotFound",
    "Offset",
    "RequestGuard",
    "Unauthorized",
    "Unprocessable",
    "create_service_app",
    "error_response",
    "install_error_handlers",
    "valid_project_name",
]
