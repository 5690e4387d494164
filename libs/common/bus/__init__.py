"""The event bus: Kafka clients, the outbox relay and the consumer runner."""

from libs.common.bus.consumer import ConsumerRunner, RetryPolicy
from libs.common.bus.handlers import HandlerContext, Handlers
from libs.common.bus.kafka import (
    all_physical_topics,
    create_consumer,
    create_producer,
    ensure_topics,
    wait_for_broker,
)
from libs.common.bus.relay import OutboxRelay

__all__ = [
    "ConsumerRunner",
    "HandlerContext",
    "Handlers",
    "OutboxRelay",
    "RetryPolicy",
    "all_physical_topics",
    "create_consumer",
    "create_producer",
    "ensure_topics",
    "wait_for_broker",
]
