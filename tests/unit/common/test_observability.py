from __future__ import annotations

import json
import logging

from opentelemetry import trace

from libs.common.observability import JsonFormatter, current_trace_id, current_traceparent, setup_tracing
from libs.common.observability.tracing import (
    context_from_traceparent,
    kafka_headers,
    traceparent_from_headers,
)


def _record(message: str) -> logging.LogRecord:
    return logging.LogRecord("gpucloud.test", logging.INFO, __file__, 1, message, None, None)


def test_json_log_lines_carry_the_active_trace_id() -> None:
    setup_tracing(service_name="tests")
    formatter = JsonFormatter(service="scheduler")
    with trace.get_tracer("t").start_as_current_span("work"):
        line = json.loads(formatter.format(_record("placed w-1")))
        assert line["trace_id"] == current_trace_id()
    assert line["message"] == "placed w-1"
    assert line["service"] == "scheduler"
    assert len(line["trace_id"]) == 32


def test_log_lines_outside_a_trace_have_no_trace_id() -> None:
    line = json.loads(JsonFormatter(service="x").format(_record("idle")))
    assert "trace_id" not in line


def test_traceparent_survives_kafka_headers_and_continues_the_trace() -> None:
    setup_tracing(service_name="tests")
    with trace.get_tracer("t").start_as_current_span("http"):
        parent = current_traceparent()
        trace_id = current_trace_id()
    assert parent is not None
    carried = traceparent_from_headers(kafka_headers(parent))
    assert carried == parent
    with trace.get_tracer("t").start_as_current_span("consume", context=context_from_traceparent(carried)):
        assert current_trace_id() == trace_id
    assert kafka_headers(None) == []
    assert traceparent_from_headers(None) is None
