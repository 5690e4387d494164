"""The gateway's Prometheus metrics (with the default process collector's CPU and memory beside them)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

__all__ = ["LIVE_STREAMS", "PROXIED", "SAMPLES_SENT", "SESSIONS_REVOKED"]

LIVE_STREAMS = Gauge("gateway_live_streams", "Live streams (/api/live) connected now.")
SAMPLES_SENT = Counter("gateway_live_samples_sent", "Sample rows sent on live streams.")
PROXIED = Counter(
    "gateway_proxied_requests", "Requests proxied to a service, by service and status.", ["service", "status"]
)
SESSIONS_REVOKED = Counter(
    "gateway_sessions_revoked", "Sessions deleted because the scheduler no longer knows their key."
)
