"""The one map from the scheduler's domain errors to HTTP answers."""

from __future__ import annotations

from libs.common.http.errors import Unprocessable
from services.scheduler.domain.errors import ItemsInvalid, ValidationError

__all__ = ["items_unprocessable", "unprocessable"]


def unprocessable(exc: ValidationError) -> Unprocessable:
    """A creation request (or draft step) the domain refused: 422, naming the field."""
    return Unprocessable(f"{exc.field}: {exc.message}", field=exc.field)


def items_unprocessable(exc: ItemsInvalid) -> Unprocessable:
    """A job array with bad items: 422 naming the first, ``details`` listing every one (its index, its
    field in the array's body, and the message a single request would get)."""
    first = exc.problems[0]
    details = [p.detail() for p in exc.problems]
    return Unprocessable(str(exc), field=first.path, details=details)
