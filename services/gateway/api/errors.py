"""The gateway's own errors, in the services' error shape."""

from __future__ import annotations

from libs.common.http.errors import ApiError

__all__ = ["BadGateway", "CsrfRefused", "PayloadTooLarge"]


class CsrfRefused(ApiError):
    """An unsafe request without the session's CSRF token, or from a foreign origin."""

    status, code = 403, "csrf"


class BadGateway(ApiError):
    """A service the request needs could not be reached."""

    status, code = 502, "bad_gateway"


class PayloadTooLarge(ApiError):
    """A request body over the gateway's limit."""

    status, code = 413, "payload_too_large"
