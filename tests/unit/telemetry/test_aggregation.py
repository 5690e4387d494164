"""Rollups, fault detection from samples, the Prometheus exposition and the sample wire codec."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from libs.common.events import EVENT_TYPES, decode
from libs.common.events.sample_wire import decode_sample_batch, encode_sample_batch
from libs.common.events.telemetry import SampleBatchV1
from services.telemetry.api.exposition import render
from services.telemetry.domain.metrics import GpuLost, GpuReading, GpuSample
from services.telemetry.domain.rollup import RollupAccumulator, percentile
from services.telemetry.service.agent.reports import sample_batch, sample_dicts
from services.telemetry.service.detect import DetectorConfig, FaultDetector

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
GPU = {"gpu": "GPU-1", "index": 0, "model": "H100", "fb_total_bytes": 100}


def test_rollup_window_has_avg_max_and_p95_and_closes_only_after_grace() -> None:
    acc = RollupAccumulator(window_s=60)
    start = T0.timestamp()
    for i in range(20):
        acc.add(node="n", at=start + i, sample={**GPU, "sm_util_pct": float(i), "fb_used_bytes": 50})
    assert list(acc.close(now=start + 62, grace_s=5)) == []
    [window] = acc.close(now=start + 66, grace_s=5)
    assert window.samples == 20
    assert window.stats["sm_util_pct"] == {"avg": 9.5, "max": 19.0, "p95": 18.0}
    assert window.stats["fb_used_pct"]["max"] == 50.0


def test_sample_for_an_already_written_window_is_dropped_not_overwriting_it() -> None:
    acc = RollupAccumulator(window_s=60)
    start = T0.timestamp()
    acc.add(node="n", at=start, sample={**GPU, "sm_util_pct": 1.0})
    assert len(list(acc.close(now=start + 70, grace_s=5))) == 1
    acc.add(node="n", at=start + 1, sample={**GPU, "sm_util_pct": 2.0})
    assert acc.late_samples == 1
    assert acc.open_windows == 0


def test_nearest_rank_percentile() -> None:
    assert percentile(list(range(1, 101)), 95) == 95
    assert percentile([3.0], 95) == 3.0


def test_thermal_fault_fires_once_until_the_gpu_cools_below_the_hysteresis() -> None:
    detector = FaultDetector(config=DetectorConfig())
    hot = {**GPU, "gpu_temp_c": 90.0}
    first = detector.observe(node="n", at=T0, sample=hot)
    assert [f.kind for f in first] == ["thermal"]
    assert first[0].evidence["gpu_temp_c"] == 90.0
    assert first[0].evidence["threshold_c"] == 87.0
    assert detector.observe(node="n", at=T0, sample=hot) == []
    assert detector.observe(node="n", at=T0, sample={**GPU, "gpu_temp_c": 80.0}) == []
    assert len(detector.observe(node="n", at=T0, sample=hot)) == 1


def test_ecc_double_bit_increase_and_single_bit_burst_are_faults() -> None:
    detector = FaultDetector(config=DetectorConfig(sbe_burst=10))
    assert detector.observe(node="n", at=T0, sample={**GPU, "ecc_sbe_count": 0, "ecc_dbe_count": 0}) == []
    assert detector.observe(node="n", at=T0, sample={**GPU, "ecc_sbe_count": 5, "ecc_dbe_count": 0}) == []
    burst = detector.observe(node="n", at=T0, sample={**GPU, "ecc_sbe_count": 300, "ecc_dbe_count": 0})
    assert burst[0].evidence["bits"] == "single"
    dbe = detector.observe(node="n", at=T0, sample={**GPU, "ecc_sbe_count": 300, "ecc_dbe_count": 1})
    assert dbe[0].evidence == dbe[0].evidence | {"bits": "double", "ecc_dbe_count": 1, "previous": 0}


def test_pcie_saturation_needs_consecutive_samples() -> None:
    detector = FaultDetector(config=DetectorConfig(pcie_samples=3))
    saturated = {**GPU, "pcie_rx_bytes_per_s": 0.97 * 50e9}
    seen = [detector.observe(node="n", at=T0, sample=saturated) for _ in range(4)]
    assert [len(s) for s in seen] == [0, 0, 1, 0]
    assert seen[2][0].kind == "pcie"
    assert seen[2][0].evidence["consecutive_samples"] == 3


def test_exposition_parses_with_dcgm_names_and_allocation_labels_and_skips_lost_gpus() -> None:
    text = render(
        [
            {**GPU, "node": "n", "sm_util_pct": 42.5, "fb_used_bytes": 25, "xid_count": 2}
            | {"workload_id": "w"},
            {"gpu": "GPU-2", "index": 1, "node": "n", "lost_reason": "XID 79", "sm_util_pct": 0.0},
            {"gpu": 'GPU-"odd\\', "index": 2, "node": "n", "sm_util_pct": 1.0, "tenant_id": "acme"},
        ]
    )
    families = {f.name: f for f in text_string_to_metric_families(text)}
    util = families["DCGM_FI_DEV_GPU_UTIL"]
    assert [s.value for s in util.samples] == [42.5, 1.0]
    assert util.samples[0].labels == {
        "gpu": "0",
        "UUID": "GPU-1",
        "device": "nvidia0",
        "modelName": "H100",
        "Hostname": "n",
        "uuid": "GPU-1",
        "node": "n",
        "model": "H100",
        "workload": "w",
        "tenant": "",
    }
    assert util.samples[1].labels["uuid"] == 'GPU-"odd\\'
    assert families["DCGM_FI_DEV_FB_USED_PERCENT"].samples[0].value == 25.0
    assert families["DCGM_EXP_XID_ERRORS_TOTAL"].type == "counter"


def test_fast_sample_wire_format_decodes_as_the_same_sample_batch_event() -> None:
    readings: list[GpuReading] = [
        GpuSample(gpu_uuid="GPU-1", node="n", index=0, timestamp=T0, sm_util_pct=50.0, ecc_sbe_total=3),
        GpuLost(gpu_uuid="GPU-2", node="n", index=1, timestamp=T0, reason="fell off the bus"),
    ]
    kwargs: dict[str, Any] = {"models": {"GPU-1": "H100"}, "allocations": {"GPU-1": ("w", "acme")}}
    kwargs["xid_totals"] = {"GPU-2": 1}
    kwargs["xid_codes"] = {"GPU-2": {79: 1}}
    raw = encode_sample_batch(node="n", at=T0, samples=sample_dicts(readings=readings, **kwargs), source="t")
    _, event = decode(raw, EVENT_TYPES)
    assert event == sample_batch(node="n", at=T0, readings=readings, **kwargs)
    assert isinstance(event, SampleBatchV1)
    assert event.samples[0].ecc_sbe_count == 3
    assert event.samples[0].tenant_id == "acme"
    assert event.samples[1].lost_reason == "fell off the bus"
    assert (event.samples[0].xid_counts, event.samples[1].xid_counts) == (None, {79: 1})
    wire = decode_sample_batch(raw)
    assert wire is not None
    assert (wire.node, wire.at, [s["gpu"] for s in wire.samples]) == ("n", T0, ["GPU-1", "GPU-2"])
