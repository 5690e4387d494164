"""The one map from inventory's domain errors to HTTP errors."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from libs.common.http import Conflict, NotFound, Unprocessable
from services.inventory.domain.errors import (
    ForbiddenTransitionError,
    InvalidMigLayoutError,
    MigNotSupportedError,
    ReconfigurationConflictError,
    TimeSliceRefusedError,
    UnknownGpuError,
)

__all__ = ["domain_errors"]


@contextmanager
def domain_errors(*, field: str) -> Iterator[None]:
    """Map core errors to API errors; `field` names the input a rejected value came from."""
    try:
        yield
    except UnknownGpuError as error:
        raise NotFound(str(error), field="uuid") from error
    except InvalidMigLayoutError as error:
        raise Unprocessable(str(error), field=field, details=list(error.problems)) from error
    except (MigNotSupportedError, TimeSliceRefusedError) as error:
        raise Unprocessable(str(error), field=field) from error
    except ReconfigurationConflictError as error:
        raise Conflict(str(error), field="uuid") from error
    except ForbiddenTransitionError as error:
        raise Conflict(str(error), field="health") from error
