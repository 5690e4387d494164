"""Prometheus metrics every service exposes on /metrics."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = [
    "CONSUMER_LAG",
    "EVENTS_CONSUMED",
    "EVENTS_DEAD_LETTERED",
    "EVENTS_FAILED",
    "EVENTS_PRODUCED",
    "HTTP_LATENCY",
    "OUTBOX_BACKLOG",
    "TENANT_REGISTRY",
]

#: Metrics labelled by tenant (its id, its costs): served only to admins, at /metrics/tenants, never in
#: the open /metrics that anyone reaching a service's port can read.
TENANT_REGISTRY = CollectorRegistry()

HTTP_LATENCY = Histogram(
    "gpucloud_http_request_duration_seconds",
    "HTTP request latency by route and status.",
    ["service", "method", "route", "status"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
EVENTS_CONSUMED = Counter(
    "gpucloud_events_consumed_total",
    "Events handled (applied or deduplicated).",
    ["service", "topic", "result"],
)
EVENTS_PRODUCED = Counter(
    "gpucloud_events_produced_total", "Events published by the relay.", ["service", "topic"]
)
EVENTS_FAILED = Counter(
    "gpucloud_events_failed_total", "Handler attempts that raised.", ["service", "topic", "event_type"]
)
EVENTS_DEAD_LETTERED = Counter(
    "gpucloud_events_dead_lettered_total", "Events sent to a dead-letter topic.", ["service", "topic"]
)
CONSUMER_LAG = Gauge(
    "gpucloud_consumer_lag", "Messages behind the log end.", ["service", "topic", "partition"]
)
OUTBOX_BACKLOG = Gauge("gpucloud_outbox_backlog", "Outbox rows not yet published.", ["service"])
