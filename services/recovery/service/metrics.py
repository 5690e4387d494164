"""Prometheus metrics of recovery's SLO: time to detect and recover, outcomes by fault type."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

__all__ = ["INCIDENTS_CLOSED", "INCIDENTS_OPENED", "SIGNALS", "TIME_TO_DETECT", "TIME_TO_RECOVER"]

_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 45, 60, 90, 120, 180, 300, 600)

TIME_TO_DETECT = Histogram(
    "recovery_time_to_detect_seconds",
    "From the fault happening to recovery opening its incident.",
    ["fault_type"],
    buckets=_BUCKETS,
)
TIME_TO_RECOVER = Histogram(
    "recovery_time_to_recover_seconds",
    "From detection to every affected workload running again.",
    ["fault_type"],
    buckets=_BUCKETS,
)
INCIDENTS_OPENED = Counter("recovery_incidents_opened_total", "Incidents opened.", ["fault_type"])
INCIDENTS_CLOSED = Counter(
    "recovery_incidents_closed_total", "Incidents closed, by outcome.", ["fault_type", "outcome"]
)
SIGNALS = Counter(
    "recovery_fault_signals_total", "Fault signals by what they did: opened, folded, ignored.", ["outcome"]
)
