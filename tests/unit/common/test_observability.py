from __future__ import annotations

import json
import logging

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from libs.common.observability import (
    JsonFormatter,
    current_trace_id,
    current_traceparent,
    setup_tracing,
    tracing,
)
from libs.common.observability.tracing import (
    context_from_traceparent,
    kafka_headers,
    span_from_traceparent,
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


PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_with_no_span_processor_a_span_is_an_id_under_its_parent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: TracerProvider())  # nothing exports
    assert tracing._spans_unread()
    with span_from_traceparent("t publish", traceparent=PARENT, kind=SpanKind.PRODUCER) as span:
        assert not span.is_recording()
        child = current_traceparent()
        assert current_trace_id() == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert child is not None
    assert child != PARENT
    version, trace_id, span_id, flags = child.split("-")
    assert (version, trace_id, flags) == ("00", "4bf92f3577b34da6a3ce929d0e0e4736", "01")
    assert span_id not in ("00f067aa0ba902b7", "0" * 16)
    with span_from_traceparent("t process", traceparent=None, kind=SpanKind.CONSUMER):
        fresh = current_traceparent()
    assert fresh is not None
    assert fresh.split("-")[1] not in (trace_id, "0" * 32)
    assert current_traceparent() is None  # nothing stays current after the block


def test_with_a_span_processor_the_span_is_recorded_and_exported(monkeypatch: pytest.MonkeyPatch) -> None:
    provider, exporter = TracerProvider(), InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)
    assert not tracing._spans_unread()
    # The module's tracer is bound to the global provider: the recorded path is held on this one.
    monkeypatch.setattr(tracing, "_TRACER", provider.get_tracer("gpucloud"))
    with span_from_traceparent("t publish", traceparent=PARENT, kind=SpanKind.PRODUCER) as span:
        assert span.is_recording()
    (finished,) = exporter.get_finished_spans()
    assert finished.name == "t publish"
    assert finished.parent is not None
    assert format(finished.parent.span_id, "016x") == "00f067aa0ba902b7"
