from __future__ import annotations

import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from libs.common.observability import flush_tracing, setup_tracing
from libs.common.observability.export import (
    TraceExportConfigError,
    exporter_names,
    service_resource,
    span_exporters_from_env,
)
from libs.common.observability.tracing import span_processors

ENDPOINT = "http://collector:4318"


def test_nothing_is_exported_without_an_endpoint_or_an_exporter_named() -> None:
    assert span_exporters_from_env({}) == []
    assert span_exporters_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}) == []


@pytest.mark.parametrize("variable", ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"])
def test_an_otlp_endpoint_alone_turns_on_the_otlp_exporter(variable: str) -> None:
    exporters = span_exporters_from_env({variable: ENDPOINT})
    assert [type(e) for e in exporters] == [OTLPSpanExporter]


def test_exporters_are_named_in_a_comma_separated_list_in_order_without_repeats() -> None:
    assert exporter_names({"OTEL_TRACES_EXPORTER": "console"}) == ["console"]
    assert exporter_names({"OTEL_TRACES_EXPORTER": " Console , otlp,console"}) == ["console", "otlp"]
    exporters = span_exporters_from_env({"OTEL_TRACES_EXPORTER": "otlp,console"})
    assert [type(e) for e in exporters] == [OTLPSpanExporter, ConsoleSpanExporter]


def test_none_turns_export_off_even_with_an_endpoint_set() -> None:
    environ = {"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT}
    assert span_exporters_from_env(environ) == []


@pytest.mark.parametrize("value", ["jaeger", "otlp,zipkin", "otlp,"])
def test_an_unknown_exporter_is_refused_naming_the_variable_and_the_allowed_values(value: str) -> None:
    with pytest.raises(TraceExportConfigError, match=r"OTEL_TRACES_EXPORTER=.*allowed: otlp, console, none"):
        span_exporters_from_env({"OTEL_TRACES_EXPORTER": value})


def test_none_combined_with_an_exporter_is_refused() -> None:
    with pytest.raises(TraceExportConfigError, match="'none' cannot be combined"):
        exporter_names({"OTEL_TRACES_EXPORTER": "none,otlp"})


def test_an_otlp_protocol_other_than_http_protobuf_is_refused_and_the_signal_one_wins() -> None:
    endpoint = {"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT}
    with pytest.raises(TraceExportConfigError, match="OTEL_EXPORTER_OTLP_PROTOCOL='grpc'"):
        span_exporters_from_env({**endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    both = {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
    assert len(span_exporters_from_env({**endpoint, **both})) == 1
    # The protocol only matters to OTLP: the console exporter ignores it.
    console = {"OTEL_TRACES_EXPORTER": "console", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
    assert len(span_exporters_from_env(console)) == 1


def test_the_resource_is_named_after_the_service_unless_the_environment_names_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=staging")
    attributes = service_resource("inventory").attributes
    assert attributes["service.name"] == "inventory"
    assert attributes["deployment.environment"] == "staging"
    assert attributes["telemetry.sdk.name"] == "opentelemetry"
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "service.name=inv-eu")
    assert service_resource("inventory").attributes["service.name"] == "inv-eu"
    monkeypatch.setenv("OTEL_SERVICE_NAME", "inventory-canary")
    assert service_resource("inventory").attributes["service.name"] == "inventory-canary"


def test_given_exporters_are_exported_at_once_and_those_from_the_environment_in_batches() -> None:
    given = InMemorySpanExporter()
    processors = span_processors(exporters=[given], environ={"OTEL_TRACES_EXPORTER": "console"})
    try:
        assert [type(p) for p in processors] == [SimpleSpanProcessor, BatchSpanProcessor]
    finally:
        for processor in processors:
            processor.shutdown()


def test_a_bad_variable_stops_setup_before_any_exporter_is_added() -> None:
    with pytest.raises(TraceExportConfigError, match="OTEL_TRACES_EXPORTER"):
        setup_tracing(service_name="tests", environ={"OTEL_TRACES_EXPORTER": "jaeger"})


def test_flush_exports_the_spans_a_batch_still_holds() -> None:
    setup_tracing(service_name="tests")
    provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider)
    exporter = InMemorySpanExporter()
    # Never exports on its own schedule. Typed as the base class: its shutdown() is annotated,
    # BatchSpanProcessor's override is not.
    batch: SpanProcessor = BatchSpanProcessor(exporter, schedule_delay_millis=3_600_000)
    provider.add_span_processor(batch)
    try:
        with trace.get_tracer("t").start_as_current_span("last before exit"):
            pass
        assert exporter.get_finished_spans() == ()
        flush_tracing()
        assert [s.name for s in exporter.get_finished_spans()] == ["last before exit"]
    finally:
        batch.shutdown()  # the provider keeps it, but a shut-down batch drops what it is given
