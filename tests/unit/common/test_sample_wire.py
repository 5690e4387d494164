"""The sample batch codec: the fast encoder and decoder give what the models and plain json give."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from libs.common.events import EventDecodeError, encode, envelop
from libs.common.events.sample_wire import (
    INT_FIELDS,
    METRIC_FIELDS,
    SAMPLE_BATCH_TYPE,
    FieldChecks,
    SampleEncoder,
    decode_sample_batch,
    decode_sample_batch_models,
    encode_sample_batch,
)
from libs.common.events.telemetry import GpuMetrics, NodeRollupV1, SampleBatchV1

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
COMPACT = {"separators": (",", ":")}
GIB = 1024**3
#: Every numeric metric of a sample: a strict read of them all.
METRICS = (*METRIC_FIELDS, "xid_count")


def _metrics(**changes: Any) -> GpuMetrics:
    values: dict[str, Any] = {
        "gpu": "GPU-n0-0", "index": 0, "model": "H100", "sm_util_pct": 50.0, "fb_used_bytes": 32 * GIB,
        "fb_total_bytes": 80 * GIB, "gpu_temp_c": 60.0, "power_w": 300.0, "ecc_dbe_count": 0, "xid_count": 0,
        "throttle_reasons": 0,
    }  # fmt: skip
    return GpuMetrics(**(values | changes))


def test_the_encoder_writes_the_envelope_encode_sample_batch_writes() -> None:
    samples: list[dict[str, Any]] = [
        {"gpu": "GPU-1", "index": 0, "sm_util_pct": 1.5},
        {"gpu": "GPU-é", "lost_reason": 'x"y'},
    ]
    encoder = SampleEncoder(source="/s")
    ours = json.loads(
        encoder.batch(node="n-é", stamp=T0.isoformat(), samples=[encoder.sample(s) for s in samples])
    )
    plain = json.loads(encode_sample_batch(node="n-é", at=T0, samples=samples, source="/s"))
    assert ours.pop("id") != plain.pop("id")
    assert ours == plain


def _batch_bytes(samples: list[dict[str, Any]], **dumps: Any) -> bytes:
    raw = encode_sample_batch(node="n", at=T0, samples=samples, source="/t")
    return json.dumps(json.loads(raw), **dumps).encode()


SAMPLES: list[dict[str, Any]] = [
    {"gpu": "GPU-1", "index": 0, "sm_util_pct": 50.5, "nested": {"samples": [1, 2]}},
    {"gpu": "GPU-2", "index": 1, "lost_reason": '"samples":[ ]}}'},
]


def test_decoding_keeps_each_samples_text_where_the_layout_is_ours() -> None:
    batch = decode_sample_batch(_batch_bytes(SAMPLES, **COMPACT))
    assert batch is not None
    assert batch.texts is not None
    assert batch.samples == SAMPLES
    assert [json.loads(t) for t in batch.texts] == SAMPLES
    empty = decode_sample_batch(encode_sample_batch(node="n", at=T0, samples=[], source="/t"))
    assert empty is not None
    assert (empty.samples, empty.texts) == ([], [])


@pytest.mark.parametrize(
    "raw",
    [
        _batch_bytes(SAMPLES),  # spaces after separators: json.loads reads it, the texts are not kept
        _batch_bytes(SAMPLES, indent=1),
        # Another "samples" array after the real one: the texts must be data.samples or nothing.
        _batch_bytes(SAMPLES, **COMPACT)[:-1] + b',"zz":{"samples":[{"gpu":"GPU-X"}]}}',
    ],
)
def test_decoding_other_layouts_gives_the_same_samples_and_keeps_no_texts(raw: bytes) -> None:
    batch = decode_sample_batch(raw)
    assert batch is not None
    assert batch.samples == SAMPLES
    # Not our layout, so the texts are not cut out of it (nor out of the array that is not data.samples):
    # the ingest serialises these samples itself.
    assert batch.texts is None


@pytest.mark.parametrize(
    "raw",
    [b'{"type":"%b","data":{"samples":[{"gpu":"a"},]}}', b'{"type":"%b","data":{"samples":[{"gpu":"a"}]}}x'],
)
def test_malformed_batches_are_still_rejected(raw: bytes) -> None:
    with pytest.raises(EventDecodeError):
        decode_sample_batch(raw % SAMPLE_BATCH_TYPE.encode())


@pytest.mark.parametrize(
    "change",
    [
        {"type": "telemetry.rollup.node.v1"},
        {"data.at": "2025-01-01T12:00:00"},  # naive: the models decide
        {"sample.xid_count": 1.0},  # an int field as a float: the models coerce it
        {"sample.gpu_temp_c": "61"},  # a string: the models coerce or refuse
        {"sample.gpu_temp_c": True},
        {"sample.index": None},
        {"sample.tenant_id": 7},
    ],
)
def test_the_plain_decoder_leaves_anything_unusual_to_the_models(change: dict[str, Any]) -> None:
    batch = SampleBatchV1(node="n0", at=T0, samples=[_metrics()])
    envelope = json.loads(encode(envelop(batch, source="t")))
    for path, value in change.items():
        if path == "type":
            envelope["type"] = value
        elif path.startswith("data."):
            envelope["data"][path[5:]] = value
        else:
            envelope["data"]["samples"][0][path[7:]] = value
    checks = FieldChecks.of_metrics(METRICS)
    assert decode_sample_batch(json.dumps(envelope).encode(), checks=checks) is None
    assert decode_sample_batch(b"not json", checks=checks) is None


def test_the_strict_read_gives_the_samples_the_loose_read_gives_and_the_models_dump() -> None:
    samples = [_metrics(), _metrics(gpu="GPU-n0-1", index=1, tenant_id="acme", workload_id="w")]
    raw = encode(envelop(SampleBatchV1(node="n0", at=T0, samples=samples), source="t"))
    strict = decode_sample_batch(raw, checks=FieldChecks.of_metrics(METRICS), keep_texts=False)
    loose = decode_sample_batch(raw)
    assert strict is not None
    assert loose is not None
    assert (strict.node, strict.at, strict.samples, strict.texts) == ("n0", T0, loose.samples, None)
    models = decode_sample_batch_models(raw)
    assert models is not None
    assert models.samples == strict.samples


def test_the_checks_type_ints_as_ints_and_floats_as_any_number_and_skip_what_is_no_metric() -> None:
    checks = FieldChecks.of_metrics(("xid_count", "gpu_temp_c", "gpu_lost", "fb_used_pct"))
    assert checks.types == (("xid_count", (int,)), ("gpu_temp_c", (int, float)))
    ints = {name for name, info in GpuMetrics.model_fields.items() if info.annotation == int | None}
    assert ints == INT_FIELDS


def test_the_models_read_coerces_and_says_why_a_record_is_no_event() -> None:
    envelope = json.loads(encode(envelop(SampleBatchV1(node="n0", at=T0, samples=[_metrics()]), source="t")))
    envelope["data"]["samples"][0]["xid_count"] = 2.0
    batch = decode_sample_batch_models(json.dumps(envelope).encode())
    assert batch is not None
    assert type(batch.samples[0]["xid_count"]) is int
    rollup = NodeRollupV1(node="n0", minute=T0, gpus=[])
    assert decode_sample_batch_models(encode(envelop(rollup, source="t"))) is None
    with pytest.raises(EventDecodeError):
        decode_sample_batch_models(b"not json")


def _row(tensor: float | None) -> tuple[Any, ...]:
    """A values row as the simulator gives it: (gpu, index, *METRIC_FIELDS values)."""
    metrics = [50.0, 20.0, 32 * GIB, 80 * GIB, 10, 20, 60.0, 66.0, 300.0, 700.0, 1980, 2619, 0, 0, 4, tensor]
    assert len(metrics) == len(METRIC_FIELDS)
    return ("GPU-n0-0", 0, *metrics)


def _expected(row: tuple[Any, ...]) -> dict[str, Any]:
    head: dict[str, Any] = {"gpu": row[0], "index": row[1], "model": "H100", "xid_count": 0}
    return head | {f: v for f, v in zip(METRIC_FIELDS, row[2:], strict=True) if v is not None}


def test_tensor_activity_goes_last_on_a_row_and_round_trips_or_is_left_out_when_none() -> None:
    assert METRIC_FIELDS[-1] == "tensor_active_pct"  # positional: appended after every older field
    encoder = SampleEncoder(source="/a")
    rows = [_row(37.5), _row(None)]
    texts = [encoder.row(r, model="H100", xid_count=0, allocation=None) for r in rows]
    assert texts == [json.dumps(_expected(r), separators=(",", ":")) for r in rows]
    assert '"tensor_active_pct"' not in texts[1]
    raw = encoder.batch(node="n0", stamp=T0.isoformat(), samples=texts)
    models = decode_sample_batch_models(raw)
    assert models is not None
    assert [s["tensor_active_pct"] for s in models.samples] == [37.5, None]


def test_a_sample_from_an_agent_before_tensor_activity_decodes_with_it_as_none() -> None:
    old = _expected(_row(None))  # every metric field of that version, no more
    assert set(old) >= set(METRIC_FIELDS[:-1])
    raw = encode_sample_batch(node="n0", at=T0, samples=[old], source="/old-agent")
    strict = decode_sample_batch(raw, checks=FieldChecks.of_metrics(METRICS))
    loose = decode_sample_batch(raw)
    models = decode_sample_batch_models(raw)
    assert strict is not None
    assert loose is not None
    assert models is not None
    assert strict.samples == loose.samples == [old]
    assert strict.samples[0].get("tensor_active_pct") is None
    assert models.samples[0]["tensor_active_pct"] is None
    assert GpuMetrics.model_validate(old).tensor_active_pct is None
