"""Builders for alerts and routes used across alerting tests."""

from __future__ import annotations

from datetime import datetime, timedelta

from services.alerting.domain.alerts import Alert, fingerprint
from services.alerting.domain.routing import Route, RoutingTree
from tests.unit.alerting.clock import at


def alert(
    name: str = "GpuMemoryHigh", *, gpu: str = "GPU-1", node: str = "node-a", ends_at: datetime | None = None
) -> Alert:
    """A GPU alert (or a node alert when gpu is empty)."""
    labels = {"alertname": name, "node": node, "severity": "critical"}
    if gpu:
        labels["gpu"] = gpu
    return Alert(
        fingerprint=fingerprint(labels),
        labels=labels,
        annotations={"summary": f"{name} on {node}", "runbook_url": "https://runbooks.example/x"},
        starts_at=at(0),
        ends_at=ends_at,
    )


def tree(**timers: timedelta) -> RoutingTree:
    """A default-only tree with explicit timers."""
    defaults = {"group_wait": timedelta(seconds=30), "group_interval": timedelta(minutes=5)}
    # model_validate, not **kwargs: a dict of timers cannot be checked against each Route field.
    return RoutingTree(default=Route.model_validate({"receiver": "oncall", **defaults, **timers}))
