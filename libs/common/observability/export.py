"""Where spans go, chosen by the standard OpenTelemetry environment variables.

``OTEL_TRACES_EXPORTER`` names the exporters (``otlp``, ``console``, ``none``; comma-separated). Unset, it
means ``otlp`` when an OTLP endpoint is set and nothing otherwise: the spec's default would send every
laptop's and every test run's spans to localhost:4318 and log each failure. The OTLP exporter (HTTP and
protobuf) reads its own variables (endpoint, headers, timeout, compression, certificates) when built.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, OTELResourceDetector, Resource
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SpanExporter

__all__ = [
    "EXPORTER_NAMES",
    "TraceExportConfigError",
    "exporter_names",
    "service_resource",
    "span_exporters_from_env",
]

TRACES_EXPORTER = "OTEL_TRACES_EXPORTER"
#: The variables that name an OTLP endpoint, the signal's own first (as the exporter reads them).
ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
PROTOCOLS = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
#: The one OTLP protocol shipped: a collector told gRPC would see HTTP requests on its gRPC port.
OTLP_PROTOCOL = "http/protobuf"
_FACTORIES: dict[str, Callable[[], SpanExporter]] = {"otlp": OTLPSpanExporter, "console": ConsoleSpanExporter}
EXPORTER_NAMES = (*_FACTORIES, "none")


class TraceExportConfigError(ValueError):
    """The environment asks for a trace export this service cannot do; start-up stops on it."""


def exporter_names(environ: Mapping[str, str]) -> list[str]:
    """The exporters ``OTEL_TRACES_EXPORTER`` names, in order, without repeats; ``none`` gives none."""
    raw = environ.get(TRACES_EXPORTER, "").strip().lower()
    if not raw:
        return ["otlp"] if any(environ.get(name, "").strip() for name in ENDPOINTS) else []
    names = list(dict.fromkeys(name.strip() for name in raw.split(",")))
    allowed = ", ".join(EXPORTER_NAMES)
    if unknown := [name for name in names if name not in EXPORTER_NAMES]:
        raise TraceExportConfigError(
            f"{TRACES_EXPORTER}={raw!r}: unknown exporter {', '.join(map(repr, unknown))}; "
            f"allowed: {allowed} (comma-separated)"
        )
    if "none" in names and len(names) > 1:
        raise TraceExportConfigError(f"{TRACES_EXPORTER}={raw!r}: 'none' cannot be combined with others")
    return [name for name in names if name != "none"]


def span_exporters_from_env(environ: Mapping[str, str]) -> list[SpanExporter]:
    """A new exporter for each one the environment names (see the module's docstring)."""
    names = exporter_names(environ)
    if "otlp" in names:
        _check_otlp_protocol(environ)
    return [_FACTORIES[name]() for name in names]


def _check_otlp_protocol(environ: Mapping[str, str]) -> None:
    for variable in PROTOCOLS:
        protocol = environ.get(variable, "").strip()
        if protocol:
            if protocol != OTLP_PROTOCOL:
                raise TraceExportConfigError(
                    f"{variable}={protocol!r}: only {OTLP_PROTOCOL!r} is supported (OTLP over HTTP)"
                )
            return


def service_resource(service_name: str) -> Resource:
    """The SDK's resource named after the service, unless ``OTEL_SERVICE_NAME`` or a ``service.name`` in
    ``OTEL_RESOURCE_ATTRIBUTES`` names it: ``Resource.create`` lets the attributes it is given win over
    the environment, so the environment's own are merged back on top."""
    return Resource.create({SERVICE_NAME: service_name}).merge(OTELResourceDetector().detect())
