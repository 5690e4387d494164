"""One registry of topics and the event types each carries, built from the family modules."""

from __future__ import annotations

from libs.common.events import agent, alerting, billing, inventory, platform, recovery, scheduler, telemetry
from libs.common.events.base import Event

__all__ = ["EVENT_TYPES", "TOPIC_EVENTS", "topic_of"]

TOPIC_EVENTS: dict[str, tuple[type[Event], ...]] = {
    platform.TOPIC: platform.EVENTS,
    inventory.TOPIC: inventory.EVENTS,
    scheduler.TOPIC: scheduler.EVENTS,
    agent.TOPIC: agent.EVENTS,
    telemetry.SAMPLES_TOPIC: telemetry.SAMPLE_EVENTS,
    telemetry.ROLLUPS_TOPIC: telemetry.ROLLUP_EVENTS,
    telemetry.FAULTS_TOPIC: telemetry.FAULT_EVENTS,
    alerting.TOPIC: alerting.EVENTS,
    billing.TOPIC: billing.EVENTS,
    recovery.TOPIC: recovery.EVENTS,
}


def _index() -> dict[str, type[Event]]:
    by_type: dict[str, type[Event]] = {}
    for topic, classes in TOPIC_EVENTS.items():
        for cls in classes:
            if cls.event_type() in by_type:
                raise RuntimeError(f"{cls.event_type()} is registered on two topics")
            cls.topic = topic
            by_type[cls.event_type()] = cls
    return by_type


#: Every registered event type → its payload class.
EVENT_TYPES: dict[str, type[Event]] = _index()


def topic_of(payload: Event | type[Event]) -> str:
    """The logical topic an event travels on."""
    cls = payload if isinstance(payload, type) else type(payload)
    if cls.event_type() not in EVENT_TYPES:
        raise KeyError(f"{cls.__name__} is not registered on any topic")
    return EVENT_TYPES[cls.event_type()].topic
