"""Outbox rows built in memory, for statements that write several of them at once.

Each row is exactly what ``PostgresUnitOfWork.emit`` writes (a fresh envelope with the current trace
context, its logical topic and subject as the key), so the relay and every consumer see no difference;
only the number of round trips changes.
"""

from __future__ import annotations

from libs.common.events import Event, encode, envelop, topic_of
from libs.common.observability.tracing import current_traceparent
from services.scheduler.store import OutboxRow

__all__ = ["outbox_row"]


def outbox_row(payload: Event, *, source: str, tenant: str | None) -> OutboxRow:
    """The outbox row of one outgoing event, as the unit of work would record it."""
    traceparent = current_traceparent()
    envelope = envelop(payload, source=f"/gpucloud/{source}", tenant=tenant, traceparent=traceparent)
    return (envelope.id, topic_of(payload), envelope.subject, encode(envelope), traceparent)
