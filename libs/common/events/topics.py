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
    "ROLLING_TOPICS",
    "SCHEDULER",
    "TELEMETRY_FAULTS",
    "TELEMETRY_ROLLUPS",
    "TELEMETRY_SAMPLES",
    "TOPIC_ROLES",
    "dlq",
]

PLATFORM = "platform.tenants"
INVENTORY = "inventory.events"
SCHEDULER = "scheduler.workloads"
NODE_AGENT = "telemetry.agent"
TELEMETRY_SAMPLES = "telemetry.samples"
TELEMETRY_ROLLUPS = "telemetry.rollups"
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
    TELEMETRY_ROLLUPS,
    TELEMETRY_FAULTS,
    ALERTING,
    BILLING,
    RECOVERY,
)


#: Who writes and who reads each topic, and what its messages are keyed by (for the catalogue).
TOPIC_ROLES: dict[str, tuple[str, str, str]] = {
    PLATFORM: ("scheduler (tenant admin API)", "every service (local auth tables)", "tenant id"),
    INVENTORY: ("inventory", "scheduler, telemetry node agent (MIG layouts)", "GPU uuid or node"),
    SCHEDULER: ("scheduler", "inventory, telemetry agent, billing, recovery", "workload id"),
    NODE_AGENT: (
        "telemetry node agent (its reports); telemetry and recovery (commands to it)",
        "inventory, scheduler, billing, recovery, telemetry node agent",
        "node or workload id",
    ),
    TELEMETRY_SAMPLES: ("telemetry node agent", "telemetry, alerting, recovery", "node"),
    TELEMETRY_ROLLUPS: ("telemetry", "billing", "node"),
    TELEMETRY_FAULTS: ("telemetry node agent, telemetry", "alerting, recovery", "GPU uuid or node"),
    ALERTING: ("alerting", "recovery", "alert fingerprint"),
    BILLING: ("billing", "scheduler, alerting", "tenant/project, workload or tenant"),
    RECOVERY: ("recovery", "inventory, scheduler, alerting, billing", "incident id"),
}


#: Topics that need no history, each with the consumers (``<service>.<consumer>``, before the prefix) that
#: read it. Each is written as a series of generations, topics of their own that are deleted once read
#: (libs/common/bus/generations.py): the embedded broker honours no retention.
ROLLING_TOPICS: dict[str, tuple[str, ...]] = {
    TELEMETRY_SAMPLES: ("telemetry.samples", "alerting.samples", "recovery.samples"),
}


def dlq(topic: str) -> str:
    """The dead-letter topic of a topic."""
    return f"{topic}.dlq"
