"""The window records read through the plain decoder are the records the models made of the same batch."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from libs.common.events.sample_wire import decode_sample_batch_models, encode_sample_batch
from services.recovery.adapters.sample_window import window_entry
from services.recovery.service.loops import _sample_batch

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
SAMPLES: list[dict[str, Any]] = [
    # Float fields written as JSON ints, as an agent may: the models made floats of them.
    {"gpu": "G-0", "index": 0, "sm_util_pct": 50, "gpu_temp_c": 70, "power_w": 300, "xid_count": 2},
    {"gpu": "G-1", "index": 1, "sm_util_pct": 12.5, "fb_used_bytes": 30, "fb_total_bytes": 40},
    {"gpu": "G-2", "index": 2, "fb_used_bytes": 50, "fb_total_bytes": 0, "throttle_reasons": 4},
    {"gpu": "G-3", "index": 3, "lost_reason": "fell off the bus"},
]


def _stored(samples: list[dict[str, Any]], *, models: bool) -> list[str]:
    raw = encode_sample_batch(node="n", at=T0, samples=samples, source="/t")
    batch = decode_sample_batch_models(raw) if models else _sample_batch(raw)
    assert batch is not None
    return [json.dumps(window_entry(s, at=batch.at)) for s in batch.samples]


def test_the_window_stores_what_the_models_stored_for_the_same_batch() -> None:
    assert _stored(SAMPLES, models=False) == _stored(SAMPLES, models=True)
    assert json.loads(_stored(SAMPLES, models=False)[0])["sm"] == 50.0


@pytest.mark.parametrize("change", [{"xid_count": 1.0}, {"gpu_temp_c": "61"}])
def test_a_batch_the_plain_read_refuses_is_read_through_the_models(change: dict[str, Any]) -> None:
    samples = [SAMPLES[0] | change]
    assert _stored(samples, models=False) == _stored(samples, models=True)


def test_another_event_on_the_topic_or_an_invalid_batch_is_no_sample_batch() -> None:
    rollup = {"type": "telemetry.rollup.node.v1", "data": {"type": "telemetry.rollup.node.v1"}}
    assert _sample_batch(json.dumps(rollup).encode()) is None
    assert _sample_batch(b"not json") is None
