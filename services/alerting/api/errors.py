"""The one map from domain errors to HTTP: a domain object that refuses its fields is a 422."""

from __future__ import annotations

from pydantic import ValidationError

from libs.common.http import Unprocessable

__all__ = ["domain_error"]


def domain_error(exc: ValidationError | ValueError, *, prefix: str = "") -> Unprocessable:
    """A 422 naming the first offending field."""
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or None
        message = str(first["msg"]).removeprefix("Value error, ")
        return Unprocessable(f"{field}: {message}", field=f"{prefix}{field}" if field else prefix or None)
    return Unprocessable(str(exc), field=prefix or None)
