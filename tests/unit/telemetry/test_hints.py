from __future__ import annotations

from typing import Any

from services.telemetry.domain.gpu_models import GPU_MODELS
from services.telemetry.domain.hints import MIN_SAMPLES, hints_for
from services.telemetry.domain.metrics import GpuSample
from tests.unit.telemetry.conftest import at

GIB = 1024**3
H100 = GPU_MODELS["H100"]


def samples(n: int = 60, *, sm: list[float] | None = None, **fields: Any) -> list[GpuSample]:
    base: dict[str, Any] = {
        "mem_util_pct": 50.0,
        "fb_used_bytes": 60 * GIB,
        "fb_total_bytes": 80 * GIB,
        "pcie_rx_bytes_per_s": 2 * 10**9,
        "power_w": 650.0,
        "power_limit_w": 700.0,
        "throttle_reasons": 0,
    } | fields
    utils = sm if sm is not None else [90.0] * n
    return [
        GpuSample(
            gpu_uuid="GPU-1", node="n", index=0, timestamp=at(i), sm_util_pct=utils[i % len(utils)], **base
        )
        for i in range(n)
    ]


def ids(found: list[Any]) -> list[str]:
    return [hint.id for hint in found]


def test_a_busy_well_fed_fp16_job_gets_no_hints() -> None:
    assert hints_for(samples=samples(), model=H100) == []


def test_too_few_samples_give_no_hints() -> None:
    few = samples(MIN_SAMPLES - 1, sm=[5.0], mem_util_pct=2.0, fb_used_bytes=GIB, power_w=100.0)
    assert hints_for(samples=few, model=H100) == []


def test_an_idle_bursty_gpu_with_little_input_is_flagged_as_waiting_on_data() -> None:
    bursty = samples(sm=[0.0, 0.0, 95.0, 5.0], mem_util_pct=10.0, pcie_rx_bytes_per_s=300 * 10**6)
    found = hints_for(samples=bursty, model=H100)
    assert "data_loading_bottleneck" in ids(found)
    hint = next(h for h in found if h.id == "data_loading_bottleneck")
    assert hint.evidence["mean_sm_util_pct"] == 25.0
    assert hint.evidence["idle_sample_share"] == 0.75
    assert "local" in hint.title.lower()


def test_a_gpu_saturating_its_pcie_link_is_not_blamed_on_the_loader() -> None:
    saturated = samples(sm=[0.0, 60.0], mem_util_pct=10.0, pcie_rx_bytes_per_s=45 * 10**9)
    assert "data_loading_bottleneck" not in ids(hints_for(samples=saturated, model=H100))


def test_memory_headroom_suggests_a_power_of_two_batch_factor() -> None:
    light = samples(sm=[70.0], fb_used_bytes=15 * GIB, power_w=600.0)
    hint = next(h for h in hints_for(samples=light, model=H100) if h.id == "batch_size")
    assert hint.evidence["suggested_batch_factor"] == 4  # 0.85 x 80 / 15 = 4.5
    assert hint.evidence["peak_fb_used_pct"] == 18.8


def test_no_batch_hint_when_memory_is_half_full_or_sms_are_saturated() -> None:
    assert "batch_size" not in ids(hints_for(samples=samples(sm=[70.0], fb_used_bytes=45 * GIB), model=H100))
    assert "batch_size" not in ids(hints_for(samples=samples(sm=[95.0], fb_used_bytes=10 * GIB), model=H100))


def test_busy_sms_at_low_power_on_tensor_core_gpus_suggest_mixed_precision() -> None:
    fp32_like = samples(sm=[92.0], power_w=300.0)
    hint = next(h for h in hints_for(samples=fp32_like, model=H100) if h.id == "mixed_precision")
    assert hint.evidence["mean_power_share"] == 0.429
    assert "heuristic" in hint.explanation.lower()


def test_no_mixed_precision_hint_without_tensor_cores_or_when_power_capped() -> None:
    fp32_like = samples(sm=[92.0], power_w=100.0, power_limit_w=250.0)
    assert "mixed_precision" not in ids(hints_for(samples=fp32_like, model=GPU_MODELS["P100"]))
    assert "mixed_precision" not in ids(hints_for(samples=fp32_like, model=None))
    capped = samples(sm=[92.0], power_w=300.0, throttle_reasons=0x4)
    assert "mixed_precision" not in ids(hints_for(samples=capped, model=H100))


def test_unknown_power_never_looks_like_low_power() -> None:
    blind = samples(sm=[92.0], power_w=None)
    assert "mixed_precision" not in ids(hints_for(samples=blind, model=H100))


def test_measured_idle_tensor_cores_at_busy_sms_suggest_mixed_precision_whatever_the_power() -> None:
    fp32 = samples(sm=[92.0], power_w=650.0, tensor_active_pct=3.0)  # near the limit: power alone says no
    hint = next(h for h in hints_for(samples=fp32, model=H100) if h.id == "mixed_precision")
    assert hint.evidence["mean_tensor_active_pct"] == 3.0
    assert "mean_power_share" not in hint.evidence
    assert "heuristic" not in hint.explanation.lower()


def test_measured_busy_tensor_cores_give_no_mixed_precision_hint_even_at_low_power() -> None:
    bf16 = samples(sm=[92.0], power_w=300.0, tensor_active_pct=45.0)
    assert "mixed_precision" not in ids(hints_for(samples=bf16, model=H100))
    # The first sample after start has no tensor activity yet: the others decide.
    first = samples(1, sm=[92.0], power_w=300.0)
    assert "mixed_precision" not in ids(hints_for(samples=first + bf16[1:], model=H100))
