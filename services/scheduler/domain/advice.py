"""Advice from the fleet's GPU models and a tenant's own history: which model, and how long a job runs.

Pure: the caller passes the models the fleet has and the tenant's completed jobs. Memory need follows the
usual rule of thumb: training with Adam in mixed precision needs about 16 bytes per parameter, inference
about 2, plus 20% for activations and buffers.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = [
    "HistoryJob",
    "ModelFacts",
    "Prediction",
    "Recommendation",
    "memory_need_gb",
    "predict",
    "recommend",
]

_BYTES_PER_PARAM = {"training": 16.0, "inference": 2.0}
_OVERHEAD = 1.2


@dataclass(frozen=True, slots=True)
class ModelFacts:
    """A GPU model in the fleet: memory and compute units per GPU, and how many are healthy."""

    model: str
    memory_gb: int
    units: float
    healthy: int


@dataclass(frozen=True, slots=True)
class HistoryJob:
    """One of the tenant's completed jobs."""

    model: str
    gpus: int
    framework: str
    duration_s: float


@dataclass(frozen=True, slots=True)
class Recommendation:
    """The advised model and count, with the reasoning and whether history backed it."""

    model: str | None
    count: int
    reasons: list[str] = field(default_factory=list)
    similar_jobs: int = 0
    history_too_thin: bool = True
    expected_duration_s: float | None = None


@dataclass(frozen=True, slots=True)
class Prediction:
    """Expected run time from similar past jobs."""

    p50_s: float | None
    p90_s: float | None
    samples: int
    history_too_thin: bool
    reasons: list[str]


def memory_need_gb(*, model_size_b: float | None, memory_gb: float | None, mode: str) -> float:
    """GPU memory the workload needs: given directly, or estimated from its parameter count (billions)."""
    if memory_gb is not None:
        return memory_gb
    if model_size_b is None:
        return 0.0
    return model_size_b * _BYTES_PER_PARAM[mode] * _OVERHEAD


def _similar(
    history: Sequence[HistoryJob], *, framework: str | None, model: str | None = None
) -> list[HistoryJob]:
    return [j for j in history if framework in (None, j.framework) and model in (None, j.model)]


def _option(facts: ModelFacts, need_gb: float) -> int:
    return max(1, math.ceil(need_gb / facts.memory_gb)) if facts.memory_gb > 0 else 1


def recommend(
    *,
    fleet: Mapping[str, ModelFacts],
    need_gb: float,
    framework: str | None,
    deadline_h: float | None,
    history: Sequence[HistoryJob],
    min_samples: int,
) -> Recommendation:
    """The model that fits the memory on the fewest GPUs, cheapest, and by history meets the deadline."""
    if not fleet:
        return Recommendation(None, 0, ["the fleet has no GPUs yet"])
    scored = []
    for facts in fleet.values():
        count = _option(facts, need_gb)
        past = _similar(history, framework=framework, model=facts.model)
        median = statistics.median(j.duration_s for j in past) if len(past) >= min_samples else None
        late = deadline_h is not None and median is not None and median > deadline_h * 3600
        # Proven-on-time first, then fewest GPUs (splitting a model costs speed), then cheapest,
        # then most history, then most available.
        scored.append(
            (
                late,
                count,
                count * facts.units,
                -len(past),
                -facts.healthy,
                facts.model,
                count,
                median,
                len(past),
            )
        )
    scored.sort()
    late, _, cost, _, _, model, count, median, samples = scored[0]
    reasons = [
        f"needs about {need_gb:.0f} GB of GPU memory; "
        f"{count} x {model} ({fleet[model].memory_gb} GB each) fits",
        f"{cost:g} compute units: the fewest GPUs, then the least units, of the models that fit",
    ]
    if median is not None:
        reasons.append(f"your {samples} similar jobs on {model} ran {median / 3600:.1f} h at the median")
    if late:
        reasons.append("no model met the deadline in your history; this one is the cheapest anyway")
    thin = samples < min_samples
    if thin:
        reasons.append(f"history too thin: {samples} similar job(s) on {model}, {min_samples} needed")
    return Recommendation(model, count, reasons, samples, thin, median)


def predict(
    *, history: Sequence[HistoryJob], framework: str | None, model: str | None, min_samples: int
) -> Prediction:
    """Median and 90th percentile run time of similar completed jobs, widening the match when thin."""
    for fw, md, label in (
        (framework, model, "same framework and model"),
        (framework, None, "same framework"),
        (None, None, "all your jobs"),
    ):
        past = sorted(j.duration_s for j in _similar(history, framework=fw, model=md))
        if len(past) >= min_samples:
            p90 = past[min(len(past) - 1, math.ceil(0.9 * len(past)) - 1)]
            reasons = [f"from {len(past)} completed jobs ({label})"]
            return Prediction(statistics.median(past), p90, len(past), False, reasons)
    total = len(history)
    return Prediction(
        None, None, total, True, [f"history too thin: {total} completed job(s), {min_samples} needed"]
    )
