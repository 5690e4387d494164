"""The one map from the scheduler's domain errors to HTTP answers."""

from __future__ import annotations

from libs.common.http.errors import Unprocessable
from services.scheduler.domain.errors import ValidationError

__all__ = ["unprocessable"]


def unprocessable(exc: ValidationError) -> Unprocessable:
    """A creation request (or draft step) the domain refused: 422, naming the field."""
    return Unprocessable(f"{exc.field}: {exc.message}", field=exc.field)
