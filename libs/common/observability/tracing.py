"""OpenTelemetry tracing whose context travels in HTTP headers, envelopes and Kafka headers."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import NonRecordingSpan, Span, SpanContext, SpanKind, TraceFlags
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from libs.common.observability.export import service_resource, span_exporters_from_env

__all__ = [
    "context_from_traceparent",
    "current_trace_id",
    "current_traceparent",
    "flush_tracing",
    "kafka_headers",
    "setup_tracing",
    "span_from_traceparent",
    "span_processors",
    "traceparent_from_headers",
]

_PROPAGATOR = TraceContextTextMapPropagator()
#: One tracer for the process. The API's proxy binds to the provider once one is installed, so it may
#: be made before ``setup_tracing``; asking the provider for a tracer per span built a new one each time.
_TRACER = trace.get_tracer("gpucloud")
_IDS = RandomIdGenerator()
_configured = False


def setup_tracing(
    *,
    service_name: str,
    exporters: Sequence[SpanExporter] = (),
    environ: Mapping[str, str] | None = None,
) -> None:
    """Install the process's tracer provider once; later calls only add exporters.

    ``exporters`` are exported synchronously (tests read them at once); ``environ`` (``serve`` passes the
    process's) adds the exporters the OpenTelemetry variables name, batched. The provider gets no sampler,
    so the SDK's ``OTEL_TRACES_SAMPLER`` and ``OTEL_TRACES_SAMPLER_ARG`` choose one.
    """
    global _configured
    processors = span_processors(exporters=exporters, environ=environ or {})  # a bad variable stops here
    provider = trace.get_tracer_provider()
    if not _configured:
        provider = TracerProvider(resource=service_resource(service_name))
        trace.set_tracer_provider(provider)
        _configured = True
    if isinstance(provider, TracerProvider):
        for processor in processors:
            provider.add_span_processor(processor)


def span_processors(*, exporters: Sequence[SpanExporter], environ: Mapping[str, str]) -> list[SpanProcessor]:
    """A simple processor per given exporter, then a batching one per exporter the environment names."""
    simple: list[SpanProcessor] = [SimpleSpanProcessor(exporter) for exporter in exporters]
    return simple + [BatchSpanProcessor(exporter) for exporter in span_exporters_from_env(environ)]


def flush_tracing() -> None:
    """Export every span still batched; each batch blocks up to the exporter's timeout if unreachable.

    Services call it as they stop: uvicorn ends a SIGTERM by raising the signal again, which kills the
    process before the SDK's exit handler can shut the provider down, so the last spans would be lost.
    """
    provider = trace.get_tracer_provider()
    if isinstance(provider, TracerProvider):
        provider.force_flush()


def current_traceparent() -> str | None:
    """The W3C traceparent of the active span, or None outside any trace."""
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return carrier.get("traceparent")


def current_trace_id() -> str | None:
    """The active trace id as 32 hex digits, or None."""
    ctx = trace.get_current_span().get_span_context()
    return format(ctx.trace_id, "032x") if ctx.is_valid else None


def context_from_traceparent(traceparent: str | None) -> otel_context.Context:
    """An OpenTelemetry context whose parent is the given traceparent (empty if None)."""
    return _PROPAGATOR.extract({"traceparent": traceparent} if traceparent else {})


def kafka_headers(traceparent: str | None) -> list[tuple[str, bytes]]:
    """Kafka message headers carrying the trace context."""
    return [("traceparent", traceparent.encode())] if traceparent else []


def traceparent_from_headers(headers: Sequence[tuple[str, bytes]] | None) -> str | None:
    """The traceparent carried in Kafka message headers, if any."""
    for key, value in headers or ():
        if key == "traceparent":
            return value.decode()
    return None


def _spans_unread() -> bool:
    """True when the SDK's provider has no span processor: no span it makes is ever exported or read.

    (A service without OTEL_* exporters, the default: spans then only give logs and the next hop their
    ids.) Reads the SDK's processor list, which it keeps private; tests/unit/common/test_observability.py
    holds both answers to the SDK in use.
    """
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        return False
    active = getattr(provider, "_active_span_processor", None)
    return getattr(active, "_span_processors", None) == ()


@contextmanager
def span_from_traceparent(
    name: str, *, traceparent: str | None, kind: SpanKind, attributes: dict[str, Any] | None = None
) -> Iterator[Span]:
    """Start a span as a child of a remote traceparent (a new trace when there is none).

    With no span processor installed (nothing exported), the span is an id only: a new span id under the
    parent's trace (or a new trace), current for the block, so logs and the next hop's traceparent carry
    it as they would a recorded span's, without the SDK building, timing and ending a span that nobody
    reads (29 us a span and its traceparent against 11 here, measured; a relay or a consumer makes one per
    event).
    """
    if _spans_unread():
        parent = trace.get_current_span(context_from_traceparent(traceparent)).get_span_context()
        ids = SpanContext(
            trace_id=parent.trace_id if parent.is_valid else _IDS.generate_trace_id(),
            span_id=_IDS.generate_span_id(),
            is_remote=False,
            trace_flags=parent.trace_flags if parent.is_valid else TraceFlags(TraceFlags.SAMPLED),
            trace_state=parent.trace_state,
        )
        with trace.use_span(NonRecordingSpan(ids), end_on_exit=False) as span:
            yield span
        return
    with _TRACER.start_as_current_span(
        name, context=context_from_traceparent(traceparent), kind=kind, attributes=attributes
    ) as span:
        yield span
