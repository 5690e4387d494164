"""The aggregator splits a sample's time to Redis into the stages that spend it."""

from __future__ import annotations

import pytest
from aiokafka import ConsumerRecord
from prometheus_client import REGISTRY

import libs.common.http  # noqa: F401  # before ingest: runtime and http import each other, http must come first
from services.telemetry.service.ingest import _created, _observe_latency


def _record(*, timestamp: int, timestamp_type: int) -> ConsumerRecord[bytes, bytes]:
    return ConsumerRecord(
        topic="t",
        partition=0,
        offset=0,
        timestamp=timestamp,
        timestamp_type=timestamp_type,
        key=b"n",
        value=b"",
        checksum=None,
        serialized_key_size=1,
        serialized_value_size=0,
        headers=(),
    )


def test_only_a_producers_create_time_counts_as_when_the_agent_batched_a_record() -> None:
    assert _created(_record(timestamp=1_700_000_000_250, timestamp_type=0)) == 1_700_000_000.25
    assert _created(_record(timestamp=1_700_000_000_250, timestamp_type=1)) is None  # broker's append time
    assert _created(_record(timestamp=-1, timestamp_type=0)) is None


def _sums() -> dict[str, float]:
    def get(name: str, labels: dict[str, str] | None = None) -> float:
        return REGISTRY.get_sample_value(name, labels or {}) or 0.0

    stages = {s: get("telemetry_sample_stage_seconds_sum", {"stage": s}) for s in ("agent", "transit")}
    aggregator = get("telemetry_sample_stage_seconds_sum", {"stage": "aggregator"})
    return stages | {"aggregator": aggregator, "total": get("telemetry_sample_to_redis_seconds_sum")}


def test_time_to_redis_is_split_into_agent_transit_and_aggregator_stages_that_add_up() -> None:
    before = _sums()
    # Two batches sampled at 100.0: one batched by the agent at 100.2, one without a create time.
    _observe_latency([(100.0, 100.2), (100.0, None)], polled=100.5, done=100.6)
    after = _sums()
    grew = {name: after[name] - before[name] for name in before}
    assert grew == pytest.approx({"agent": 0.2, "transit": 0.3, "aggregator": 0.2, "total": 1.2})
