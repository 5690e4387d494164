"""The event bus: Kafka clients, the outbox relay and the consumer runner."""

from libs.common.bus.consumer import ConsumerRunner, Handler, HandlerContext, RetryPolicy
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
    "Handler",
    "HandlerContext",
    "OutboxRelay",
    "RetryPolicy",
    "all_physical_topics",
    "create_consumer",
    "create_producer",
    "ensure_topics",
    "wait_for_broker",
]
