"""Query parameters every service's lists share, bounded to what PostgreSQL can hold."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

__all__ = ["BIGINT_MAX", "Offset"]

#: The largest PostgreSQL ``bigint`` (int64). An integer a caller sends that reaches SQL is bounded by it
#: (or less), so too large a number is a 422 naming the field, never the driver's overflow as a 500.
BIGINT_MAX = 2**63 - 1

Offset = Annotated[int, Query(ge=0, le=BIGINT_MAX, description="Rows to skip.")]
