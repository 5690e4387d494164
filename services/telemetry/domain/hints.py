"""The "one-click optimise" hints, from a workload's recent samples. All three rules are heuristics.

What NVML's core metrics can and cannot tell:
- data loading: a GPU that idles between short bursts, with little memory traffic and little PCIe input,
  is most often waiting for its input pipeline. It could also be a small model or a sync-bound job.
- batch size: memory headroom says a larger batch fits; it assumes activations dominate memory use.
- mixed precision: SM utilisation says "a kernel was running", not which units ran. Where the samples
  carry tensor-core activity (tensor_active_pct, NVML's GPM on Hopper and later), busy SMs with idle
  tensor pipes say it directly. Elsewhere power stands in: Tensor-Core (FP16/BF16) kernels at high SM
  utilisation run the card close to its power limit, FP32 SIMT kernels at the same utilisation usually
  draw well under it; the hint says which signal it used.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from services.telemetry.domain.gpu_models import GpuModelSpec
from services.telemetry.domain.metrics import GpuSample

__all__ = ["MIN_SAMPLES", "Hint", "SampleSummary", "hints_for", "summarise"]

MIN_SAMPLES = 30  # half a minute at 1 Hz: fewer says more about start-up than about the job
LOADER_MAX_SM_PCT, LOADER_MAX_MEM_UTIL_PCT, LOADER_MIN_IDLE_SHARE = 50.0, 30.0, 0.2
LOADER_MAX_PCIE_SHARE = 0.25
BATCH_MAX_FB_PCT, BATCH_MAX_SM_PCT, BATCH_TARGET_FB_SHARE = 50.0, 85.0, 0.85
AMP_MIN_SM_PCT, AMP_MAX_POWER_SHARE, AMP_MAX_TENSOR_PCT = 70.0, 0.6, 10.0
_POWER_OR_THERMAL_THROTTLE = 0x4 | 0x20 | 0x40 | 0x80


class Hint(BaseModel):
    """One optimisation suggestion with the numbers behind it."""

    model_config = ConfigDict(frozen=True)
    id: Literal["data_loading_bottleneck", "batch_size", "mixed_precision"] = Field(description="Rule id")
    title: str = Field(description="One-line suggestion")
    explanation: str = Field(description="Why, in words, including the heuristic's limits")
    evidence: dict[str, float] = Field(description="The numbers the rule looked at")


@dataclass(frozen=True, slots=True)
class SampleSummary:
    """The statistics the rules read, over one workload's recent samples."""

    count: int
    mean_sm_pct: float
    idle_share: float  # share of samples with SM utilisation under 10 %
    mean_mem_util_pct: float
    mean_pcie_rx_bytes_per_s: float
    peak_fb_used_bytes: int
    fb_total_bytes: int
    mean_power_share: float  # power draw / power limit
    power_or_thermal_throttled_share: float
    mean_tensor_active_pct: float | None = None  # over the samples that carry it; None: none did


def summarise(samples: Sequence[GpuSample]) -> SampleSummary | None:
    """Summarise samples that carry the needed metrics; None when too few."""
    usable = [
        s for s in samples if s.sm_util_pct is not None and s.fb_used_bytes is not None and s.fb_total_bytes
    ]
    if len(usable) < MIN_SAMPLES:
        return None
    sm = [s.sm_util_pct or 0.0 for s in usable]
    powered = [s for s in usable if s.power_w is not None and s.power_limit_w]
    tensor = [s.tensor_active_pct for s in usable if s.tensor_active_pct is not None]
    return SampleSummary(
        count=len(usable),
        mean_sm_pct=statistics.fmean(sm),
        idle_share=sum(v < 10.0 for v in sm) / len(sm),
        mean_mem_util_pct=statistics.fmean(s.mem_util_pct or 0.0 for s in usable),
        mean_pcie_rx_bytes_per_s=statistics.fmean(s.pcie_rx_bytes_per_s or 0 for s in usable),
        peak_fb_used_bytes=max(s.fb_used_bytes or 0 for s in usable),
        fb_total_bytes=max(s.fb_total_bytes or 0 for s in usable),
        mean_power_share=statistics.fmean((s.power_w or 0.0) / (s.power_limit_w or 1.0) for s in powered)
        if powered
        else 1.0,  # unknown power must not look like "low power"
        power_or_thermal_throttled_share=sum(
            bool((s.throttle_reasons or 0) & _POWER_OR_THERMAL_THROTTLE) for s in usable
        )
        / len(usable),
        mean_tensor_active_pct=statistics.fmean(tensor) if tensor else None,
    )


def hints_for(*, samples: Sequence[GpuSample], model: GpuModelSpec | None) -> list[Hint]:
    """All hints that apply to a workload's recent samples on a GPU of `model` (None = unknown model)."""
    summary = summarise(samples)
    if summary is None:
        return []
    found = [
        _data_loading(summary, model=model),
        _batch_size(summary),
        _mixed_precision(summary, model=model),
    ]
    return [hint for hint in found if hint is not None]


def _data_loading(s: SampleSummary, *, model: GpuModelSpec | None) -> Hint | None:
    """GPU idles between bursts with little memory traffic and little input arriving: it waits on input."""
    link = model.pcie_bytes_per_s if model is not None else 16 * 10**9
    pcie_share = s.mean_pcie_rx_bytes_per_s / link
    if not (
        s.mean_sm_pct < LOADER_MAX_SM_PCT
        and s.mean_mem_util_pct < LOADER_MAX_MEM_UTIL_PCT
        and s.idle_share >= LOADER_MIN_IDLE_SHARE
        and pcie_share < LOADER_MAX_PCIE_SHARE
    ):
        return None
    return Hint(
        id="data_loading_bottleneck",
        title="The GPU waits for data: read from local SSD or add data-loader workers",
        explanation=(
            f"SM utilisation averaged {s.mean_sm_pct:.0f}% and the GPU was idle in {s.idle_share:.0%} of "
            f"samples, while memory traffic ({s.mean_mem_util_pct:.0f}%) and PCIe input "
            f"({pcie_share:.1%} of the link) stayed low: the input pipeline, not the GPU, sets the pace. "
            "Stage the dataset on local NVMe instead of network storage, raise the loader's worker count "
            "and prefetching, or pin host memory. Heuristic: a small model or a sync-bound job looks alike."
        ),
        evidence={
            "mean_sm_util_pct": round(s.mean_sm_pct, 1),
            "idle_sample_share": round(s.idle_share, 3),
            "mean_mem_util_pct": round(s.mean_mem_util_pct, 1),
            "mean_pcie_rx_bytes_per_s": round(s.mean_pcie_rx_bytes_per_s),
            "pcie_rx_link_share": round(pcie_share, 4),
            "samples": s.count,
        },
    )


def _batch_size(s: SampleSummary) -> Hint | None:
    """Memory peak under half the card and SM not saturated: a larger batch fits and can raise throughput."""
    peak_pct = 100.0 * s.peak_fb_used_bytes / s.fb_total_bytes
    if peak_pct >= BATCH_MAX_FB_PCT or s.mean_sm_pct >= BATCH_MAX_SM_PCT or s.peak_fb_used_bytes <= 0:
        return None
    fits = BATCH_TARGET_FB_SHARE * s.fb_total_bytes / s.peak_fb_used_bytes
    factor = 2
    while factor * 2 <= min(fits, 8):
        factor *= 2
    return Hint(
        id="batch_size",
        title=f"Memory headroom allows about a {factor}x larger batch",
        explanation=(
            f"Peak memory use was {peak_pct:.0f}% of the card and SM utilisation averaged "
            f"{s.mean_sm_pct:.0f}%. Scaling the batch by {factor}x keeps the peak under "
            f"{BATCH_TARGET_FB_SHARE:.0%} if activations dominate memory (weights and optimiser state do not "
            "grow with the batch, so this is an upper bound). Scale the learning rate with the batch."
        ),
        evidence={
            "peak_fb_used_pct": round(peak_pct, 1),
            "peak_fb_used_bytes": s.peak_fb_used_bytes,
            "fb_total_bytes": s.fb_total_bytes,
            "mean_sm_util_pct": round(s.mean_sm_pct, 1),
            "suggested_batch_factor": factor,
        },
    )


def _mixed_precision(s: SampleSummary, *, model: GpuModelSpec | None) -> Hint | None:
    """Busy SMs on a Tensor-Core GPU with idle tensor pipes (where measured) or at a low power share
    (where not) suggest FP32 math where BF16/FP16 would do."""
    if model is None or not model.tensor_cores or s.mean_sm_pct < AMP_MIN_SM_PCT:
        return None
    if s.mean_tensor_active_pct is not None:
        return _idle_tensor_cores(s, model=model, tensor_pct=s.mean_tensor_active_pct)
    if s.mean_power_share >= AMP_MAX_POWER_SHARE:
        return None
    if s.power_or_thermal_throttled_share > 0.1:
        return None  # a capped or hot card draws little power for other reasons
    return Hint(
        id="mixed_precision",
        title=f"Try mixed precision (BF16/FP16): the {model.name} has Tensor Cores",
        explanation=(
            f"SM utilisation averaged {s.mean_sm_pct:.0f}% yet power averaged only {s.mean_power_share:.0%} "
            "of the limit. Tensor-Core kernels at that utilisation usually run near the power limit, so the "
            "job probably computes in FP32. Automatic mixed precision often gives 1.5-2x (2.1x on "
            "ResNet-50). Heuristic: these samples carry no tensor-pipe activity (NVML measures it on Hopper "
            "and later only); memory-bound kernels look alike."
        ),
        evidence={
            "mean_sm_util_pct": round(s.mean_sm_pct, 1),
            "mean_power_share": round(s.mean_power_share, 3),
            "power_or_thermal_throttled_share": round(s.power_or_thermal_throttled_share, 3),
            "samples": s.count,
        },
    )


def _idle_tensor_cores(s: SampleSummary, *, model: GpuModelSpec, tensor_pct: float) -> Hint | None:
    """Busy SMs while the tensor pipes idle: measured, so no power heuristic is needed."""
    if tensor_pct >= AMP_MAX_TENSOR_PCT:
        return None
    return Hint(
        id="mixed_precision",
        title=f"Try mixed precision (BF16/FP16): the {model.name}'s Tensor Cores sit idle",
        explanation=(
            f"SM utilisation averaged {s.mean_sm_pct:.0f}% while a tensor-core pipe was active only "
            f"{tensor_pct:.0f}% of the time, so the job's math runs on the FP32 units. Automatic mixed "
            "precision (or TF32 matmuls) moves it onto the Tensor Cores and often gives 1.5-2x. A job "
            "bound by memory-bound or integer kernels looks alike."
        ),
        evidence={
            "mean_sm_util_pct": round(s.mean_sm_pct, 1),
            "mean_tensor_active_pct": round(tensor_pct, 1),
            "samples": s.count,
        },
    )
