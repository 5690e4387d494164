"""What a route depends on, read from FastAPI's dependency tree (the OpenAPI document and the rate limit
both ask which routes need a key or the admin key)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from fastapi.dependencies.models import Dependant

__all__ = ["dependency_calls"]


def dependency_calls(dependant: Dependant) -> Iterator[Callable[..., Any]]:
    """Every dependency of a route, however deep (``Admin`` depends on ``authenticate``)."""
    pending = [dependant]
    while pending:
        current = pending.pop()
        if current.call is not None:
            yield current.call
        pending.extend(current.dependencies)
