"""Events: versioned payloads, the CloudEvents envelope, the topic registry and the JSON codec."""

from libs.common.events.base import Event
from libs.common.events.envelope import (
    Envelope,
    EventDecodeError,
    UnknownEventType,
    decode,
    encode,
    envelop,
)
from libs.common.events.registry import EVENT_TYPES, TOPIC_EVENTS, topic_of

__all__ = [
    "EVENT_TYPES",
    "TOPIC_EVENTS",
    "Envelope",
    "Event",
    "EventDecodeError",
    "UnknownEventType",
    "decode",
    "encode",
    "envelop",
    "topic_of",
]
