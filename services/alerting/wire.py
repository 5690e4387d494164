"""The sample hot path's decoder: SampleBatchV1 envelopes read with plain `json`, not pydantic.

At 10,000 GPUs a second, validating every batch through the models costs several times what
evaluating it does. `decode_plain` accepts exactly the batches the models would accept unchanged
(every field the rules read has its exact JSON type) and returns None for anything else, which the
evaluator then hands to the models: other event types, coercions, invalid records.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from services.alerting.samples import FLOAT_FIELDS, INT_FIELDS, derive, reading_fields

__all__ = ["SAMPLE_BATCH_TYPE", "FieldChecks", "WireBatch", "decode_plain", "field_checks"]

# SampleBatchV1.event_type() (a unit test holds them equal; the core does not import libs).
SAMPLE_BATCH_TYPE = "telemetry.samples.batch.v1"

# (wire field, the JSON types GpuMetrics takes for it as they are) for the fields rules read.
FieldChecks = tuple[tuple[str, tuple[type, ...]], ...]
_INT: tuple[type, ...] = (int,)
_NUMBER: tuple[type, ...] = (int, float)


@dataclass(frozen=True, slots=True)
class WireBatch:
    """A SampleBatchV1 as the engine reads it: readings are GpuMetrics dicts (see samples.py)."""

    node: str
    at: datetime
    readings: list[dict[str, Any]]


def field_checks(metrics: Collection[str]) -> FieldChecks:
    """The type checks of the wire fields that the rules' `metrics` are read from."""
    return tuple(
        (f, _INT if f in INT_FIELDS else _NUMBER)
        for f in reading_fields(metrics)
        if f in INT_FIELDS or f in FLOAT_FIELDS
    )


def decode_plain(raw: bytes, checks: FieldChecks) -> WireBatch | None:
    """A sample batch decoded with `json` (readings `derive`d), or None: let the models judge it."""
    try:
        envelope = json.loads(raw)
        if envelope["type"] != SAMPLE_BATCH_TYPE:
            return None
        data = envelope["data"]
        node, samples = data["node"], data["samples"]
        if data.get("type", SAMPLE_BATCH_TYPE) != SAMPLE_BATCH_TYPE or type(node) is not str:
            return None
        at = datetime.fromisoformat(data["at"])
        if at.tzinfo is None or type(samples) is not list:
            return None
        for sample in samples:
            if type(sample["gpu"]) is not str or type(sample["index"]) is not int:
                return None
            tenant, workload = sample.get("tenant_id"), sample.get("workload_id")
            if type(sample.get("model", "")) is not str or (
                (tenant is not None and type(tenant) is not str)
                or (workload is not None and type(workload) is not str)
            ):
                return None
            for name, kinds in checks:
                value = sample.get(name)
                if value is not None and value.__class__ not in kinds:
                    return None
            derive(sample)
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    return WireBatch(node, at, samples)
