"""A workload's lifecycle events stay in the trace of the request that submitted it."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from opentelemetry.trace import SpanKind

from libs.common.observability.tracing import span_from_traceparent

__all__ = ["batch_trace", "workload_trace"]


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


@contextmanager
def batch_trace(*, workload_ids: Sequence[str], traceparent: str | None, name: str) -> Iterator[None]:
    """``workload_trace`` for workloads that share one submission trace (a job array's items): one span
    for all of them, so committing thousands costs one span, not thousands."""
    if len(workload_ids) == 1 or not traceparent:
        with workload_trace(workload_id=workload_ids[0], traceparent=traceparent, name=name):
            yield
        return
    attributes = {"workload.count": len(workload_ids), "workload.first_id": workload_ids[0]}
    with span_from_traceparent(name, traceparent=traceparent, kind=SpanKind.INTERNAL, attributes=attributes):
        yield
