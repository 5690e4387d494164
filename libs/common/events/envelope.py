"""A CloudEvents 1.0 envelope around an event payload, and its JSON codec."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from libs.common.events.base import Event

__all__ = ["Envelope", "EventDecodeError", "UnknownEventType", "decode", "encode", "envelop"]


class EventDecodeError(ValueError):
    """The bytes are not a valid envelope or the payload does not match its declared type."""


class UnknownEventType(EventDecodeError):
    """The envelope declares a type no registered payload class carries."""


class Envelope(BaseModel):
    """CloudEvents 1.0 attributes plus the ``tenant`` and ``traceparent`` extensions."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    specversion: Literal["1.0"] = "1.0"
    id: str = Field(description="Unique event id; consumers dedupe on it.")
    source: str = Field(description="The producing service, e.g. /gpucloud/inventory.")
    type: str = Field(description="Versioned event type, e.g. inventory.gpu.drained.v1.")
    time: datetime = Field(description="When the fact happened (UTC).")
    subject: str = Field(description="Aggregate id; also the Kafka message key.")
    tenant: str | None = Field(default=None, description="Tenant the event concerns, if any.")
    traceparent: str | None = Field(default=None, description="W3C trace context of the cause.")
    datacontenttype: Literal["application/json"] = "application/json"
    data: dict[str, Any] = Field(description="The payload, as JSON.")


def envelop(
    payload: Event,
    *,
    source: str,
    tenant: str | None = None,
    traceparent: str | None = None,
    time: datetime | None = None,
    event_id: str | None = None,
) -> Envelope:
    """Wrap a payload in a fresh envelope whose subject is the payload's aggregate id."""
    return Envelope(
        id=event_id or str(uuid.uuid4()),
        source=source,
        type=payload.event_type(),
        time=time or datetime.now(UTC),
        subject=payload.subject(),
        tenant=tenant,
        traceparent=traceparent,
        data=payload.model_dump(mode="json"),
    )


def encode(envelope: Envelope) -> bytes:
    """Serialise an envelope to JSON bytes."""
    return envelope.model_dump_json().encode()


def decode(raw: bytes, types: dict[str, type[Event]]) -> tuple[Envelope, Event]:
    """Parse JSON bytes into an envelope and its typed payload, using a type → class map."""
    try:
        envelope = Envelope.model_validate_json(raw)
    except ValidationError as exc:
        raise EventDecodeError(f"not a valid envelope: {exc.errors()[0]['msg']}") from exc
    payload_cls = types.get(envelope.type)
    if payload_cls is None:
        raise UnknownEventType(f"unknown event type {envelope.type!r}")
    try:
        return envelope, payload_cls.model_validate(envelope.data)
    except ValidationError as exc:
        raise EventDecodeError(f"{envelope.type} payload invalid: {exc}") from exc
