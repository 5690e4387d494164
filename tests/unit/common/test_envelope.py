from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from libs.common.events import (
    EVENT_TYPES,
    EventDecodeError,
    UnknownEventType,
    decode,
    encode,
    envelop,
    topic_of,
)
from libs.common.events.inventory import GpuHealthChangedV1
from libs.common.events.platform import TenantCreatedV1


def test_envelope_round_trips_with_typed_payload_and_cloudevents_attributes() -> None:
    payload = GpuHealthChangedV1(
        gpu_uuid="GPU-1", node="n1", previous="healthy", health="draining", reason="xid 79"
    )
    env = envelop(
        payload,
        source="/gpucloud/inventory",
        tenant=None,
        traceparent="00-" + "a" * 32 + "-" + "b" * 16 + "-01",
    )
    decoded_env, decoded = decode(encode(env), EVENT_TYPES)
    assert decoded == payload
    assert decoded_env.specversion == "1.0"
    assert decoded_env.subject == "GPU-1"
    assert decoded_env.type == "inventory.gpu.health_changed.v1"
    assert decoded_env.traceparent == env.traceparent


def test_unknown_fields_are_ignored_by_the_tolerant_reader() -> None:
    env = envelop(TenantCreatedV1(tenant_id="acme", name="Acme"), source="x")
    raw = json.loads(encode(env))
    raw["data"]["added_in_a_later_minor_version"] = 1
    raw["unknown_attribute"] = "x"
    _, payload = decode(json.dumps(raw).encode(), EVENT_TYPES)
    assert payload == TenantCreatedV1(tenant_id="acme", name="Acme")


def test_unknown_type_is_refused_by_name() -> None:
    raw = json.loads(encode(envelop(TenantCreatedV1(tenant_id="acme", name="A"), source="x")))
    raw["type"] = "platform.tenant.exploded.v9"
    with pytest.raises(UnknownEventType, match=r"platform\.tenant\.exploded\.v9"):
        decode(json.dumps(raw).encode(), EVENT_TYPES)


@pytest.mark.parametrize("raw", [b"not json", b"{}", b'{"id": 1}'])
def test_garbage_is_a_decode_error(raw: bytes) -> None:
    with pytest.raises(EventDecodeError):
        decode(raw, EVENT_TYPES)


def test_payload_that_does_not_match_its_type_is_a_decode_error() -> None:
    raw = json.loads(encode(envelop(TenantCreatedV1(tenant_id="acme", name="A"), source="x")))
    del raw["data"]["name"]
    with pytest.raises(EventDecodeError, match=r"platform\.tenant\.created\.v1"):
        decode(json.dumps(raw).encode(), EVENT_TYPES)


def test_payloads_are_immutable() -> None:
    payload = TenantCreatedV1(tenant_id="acme", name="A")
    with pytest.raises(ValidationError):
        payload.name = "B"  # type: ignore[misc]


def test_topic_of_an_event_is_its_family_topic() -> None:
    assert topic_of(TenantCreatedV1) == "platform.tenants"
    assert topic_of(
        GpuHealthChangedV1(gpu_uuid="g", node="n", previous="healthy", health="failed", reason="r")
    ) == ("inventory.events")
