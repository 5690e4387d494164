"""Time-slicing (vGPU-style sharing): how many workloads may share one GPU, by workload kind.

The source article measured deep-learning training 23% slower once one GPU was shared more than
1:4, so ratios above TRAINING_MAX_RATIO are refused for training by default; inference and
graphics tolerate it and get the ratio with a warning instead.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from services.inventory.domain.errors import TimeSliceRefusedError

__all__ = [
    "MAX_RATIO",
    "TRAINING_MAX_RATIO",
    "TimeSliceDecision",
    "WorkloadKind",
    "decide_time_slice",
]

# Beyond 16 contexts the per-share memory of even an H200 drops under 9 GB and context
# switching dominates; no vGPU profile NVIDIA ships goes finer for compute work.
MAX_RATIO = 16
TRAINING_MAX_RATIO = 4


class WorkloadKind(StrEnum):
    """What the shares of a time-sliced GPU are meant to run."""

    TRAINING = "training"
    INFERENCE = "inference"
    GRAPHICS = "graphics"


class TimeSliceDecision(BaseModel):
    """An accepted time-slicing ratio, with warnings the API passes on to the caller."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ratio: int = Field(ge=1, le=MAX_RATIO)
    workload_kind: WorkloadKind
    warnings: tuple[str, ...] = ()


def decide_time_slice(
    *,
    ratio: int,
    workload_kind: WorkloadKind,
    training_max_ratio: int = TRAINING_MAX_RATIO,
    max_ratio: int = MAX_RATIO,
) -> TimeSliceDecision:
    """Accept `ratio` for `workload_kind` (possibly with a warning) or raise TimeSliceRefusedError."""
    if not 1 <= ratio <= max_ratio:
        raise TimeSliceRefusedError(f"time-slice ratio must be between 1 and {max_ratio}, got {ratio}")
    if ratio <= training_max_ratio:
        return TimeSliceDecision(ratio=ratio, workload_kind=workload_kind)
    if workload_kind is WorkloadKind.TRAINING:
        raise TimeSliceRefusedError(
            f"time-slice ratio 1:{ratio} is refused for training: beyond 1:{training_max_ratio} "
            "training ran 23% slower in the reference measurement; use MIG or a whole GPU"
        )
    warning = (
        f"ratio 1:{ratio} exceeds 1:{training_max_ratio}: each {workload_kind.value} workload gets "
        f"at most 1/{ratio} of the GPU's time and memory; expect higher latency under load"
    )
    return TimeSliceDecision(ratio=ratio, workload_kind=workload_kind, warnings=(warning,))
