"""Logical topic names: the one place they are spelled. The bus adds the configured prefix."""

from __future__ import annotations

__all__ = [
    "ALERTING",
    "ALL_TOPICS",
    "BILLING",
    "INVENTORY",
    "NODE_AGENT",
    "PLATFORM",
    "RECOVERY",
    "SCHEDULER",
    "TELEMETRY_FAULTS",
    "TELEMETRY_SAMPLES",
    "dlq",
]

PLATFORM = "platform.tenants"
INVENTORY = "inventory.events"
SCHEDULER = "scheduler.workloads"
NODE_AGENT = "telemetry.agent"
TELEMETRY_SAMPLES = "telemetry.samples"
TELEMETRY_FAULTS = "telemetry.faults"
ALERTING = "alerting.alerts"
BILLING = "billing.events"
RECOVERY = "recovery.events"

ALL_TOPICS: tuple[str, ...] = (
    PLATFORM,
    INVENTORY,
    SCHEDULER,
    NODE_AGENT,
    TELEMETRY_SAMPLES,
    TELEMETRY_FAULTS,
    ALERTING,
    BILLING,
    RECOVERY,
)


def dlq(topic: str) -> str:
    """The dead-letter topic of a topic."""
    return f"{topic}.dlq"
