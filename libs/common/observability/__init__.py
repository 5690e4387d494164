"""Tracing, metrics and JSON logging."""

from libs.common.observability.logging import JsonFormatter, setup_logging
from libs.common.observability.tracing import (
    current_trace_id,
    current_traceparent,
    flush_tracing,
    setup_tracing,
)

__all__ = [
    "JsonFormatter",
    "current_trace_id",
    "current_traceparent",
    "flush_tracing",
    "setup_logging",
    "setup_tracing",
]
