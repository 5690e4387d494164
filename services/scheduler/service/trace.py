"""A workload's lifecycle events stay in the trace of the request that submitted it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry.trace import SpanKind

from libs.common.observability.tracing import span_from_traceparent

__all__ = ["workload_trace"]


@contextmanager
def workload_trace(*, workload_id: str, traceparent: str | None, name: str) -> Iterator[None]:
    """Run the block in a span under the workload's submission trace (as is when it has none).

    The placer and the consumers act long after the request; events they emit inside this block
    carry the submission's trace id, so one trace follows a workload from POST to its end.
    """
    if not traceparent:
        yield
        return
    attributes = {"workload.id": workload_id}
    with span_from_traceparent(name, traceparent=traceparent, kind=SpanKind.INTERNAL, attributes=attributes):
        yield
