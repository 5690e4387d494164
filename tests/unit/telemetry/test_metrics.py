from __future__ import annotations

from services.telemetry.domain.metrics import (
    METRICS,
    PROMETHEUS_NAMES,
    GpuLost,
    GpuSample,
    SampleBatch,
    decode_throttle_reasons,
)
from tests.unit.telemetry.conftest import T0


def test_the_twelve_core_metrics_have_distinct_dcgm_style_names() -> None:
    names = [spec.prometheus for spec in METRICS]
    assert len(names) == len(set(names))
    assert all(name.startswith(("DCGM_FI_", "DCGM_EXP_")) for name in names)
    assert PROMETHEUS_NAMES["sm_util_pct"] == "DCGM_FI_DEV_GPU_UTIL"
    assert PROMETHEUS_NAMES["fb_used_bytes"] == "DCGM_FI_DEV_FB_USED"


def test_every_metric_field_except_derived_ones_exists_on_the_sample() -> None:
    derived = {"fb_used_pct", "xid_total"}
    fields = {spec.field for spec in METRICS} - derived
    assert fields <= set(GpuSample.model_fields)


def test_xid_errors_are_a_counter_never_a_gauge() -> None:
    kinds = {spec.field: spec.kind for spec in METRICS}
    assert kinds["xid_total"] == "counter"
    assert "xid" not in GpuSample.model_fields


def test_throttle_mask_decodes_known_and_unknown_bits() -> None:
    assert decode_throttle_reasons(0) == ()
    assert decode_throttle_reasons(0x4 | 0x40) == ("sw_power_cap", "hw_thermal_slowdown")
    assert decode_throttle_reasons(0x1000) == ("bit_0x1000",)


def test_unsupported_metrics_are_none_and_listed() -> None:
    sample = GpuSample(gpu_uuid="GPU-1", node="n", index=0, timestamp=T0, sm_util_pct=10.0)
    assert sample.mem_temp_c is None
    assert "mem_temp_c" in sample.unsupported()
    assert "sm_util_pct" not in sample.unsupported()
    assert sample.fb_used_pct is None


def test_framebuffer_used_percentage_is_derived_from_bytes() -> None:
    sample = GpuSample(
        gpu_uuid="GPU-1", node="n", index=0, timestamp=T0, fb_used_bytes=25, fb_total_bytes=100
    )
    assert sample.fb_used_pct == 25.0


def test_a_batch_on_the_wire_omits_unsupported_fields_and_round_trips_lost_gpus() -> None:
    batch = SampleBatch(
        node="n",
        timestamp=T0,
        readings=(
            GpuSample(gpu_uuid="GPU-1", node="n", index=0, timestamp=T0, sm_util_pct=1.0),
            GpuLost(gpu_uuid="GPU-2", node="n", index=1, timestamp=T0, reason="XID 79"),
        ),
    )
    wire = batch.to_wire()
    assert b"mem_temp_c" not in wire
    decoded = SampleBatch.model_validate_json(wire)
    assert isinstance(decoded.readings[1], GpuLost)
    assert decoded == batch
