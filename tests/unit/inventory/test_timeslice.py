from __future__ import annotations

import pytest

from services.inventory.domain.errors import TimeSliceRefusedError
from services.inventory.domain.timeslice import MAX_RATIO, TRAINING_MAX_RATIO, WorkloadKind, decide_time_slice


@pytest.mark.parametrize("ratio", [0, -1, MAX_RATIO + 1])
def test_ratios_outside_one_to_the_maximum_are_refused(ratio: int) -> None:
    with pytest.raises(TimeSliceRefusedError, match=f"between 1 and {MAX_RATIO}"):
        decide_time_slice(ratio=ratio, workload_kind=WorkloadKind.INFERENCE)


@pytest.mark.parametrize("ratio", range(1, TRAINING_MAX_RATIO + 1))
def test_training_up_to_one_in_four_is_accepted_without_warnings(ratio: int) -> None:
    decision = decide_time_slice(ratio=ratio, workload_kind=WorkloadKind.TRAINING)
    assert decision.ratio == ratio
    assert decision.warnings == ()


def test_training_beyond_one_in_four_is_refused_citing_the_slowdown() -> None:
    with pytest.raises(TimeSliceRefusedError, match="23% slower"):
        decide_time_slice(ratio=TRAINING_MAX_RATIO + 1, workload_kind=WorkloadKind.TRAINING)


@pytest.mark.parametrize("kind", [WorkloadKind.INFERENCE, WorkloadKind.GRAPHICS])
def test_inference_and_graphics_beyond_one_in_four_are_accepted_with_a_warning(kind: WorkloadKind) -> None:
    decision = decide_time_slice(ratio=8, workload_kind=kind)
    assert decision.ratio == 8
    assert len(decision.warnings) == 1
    assert "1:8" in decision.warnings[0]


def test_the_training_limit_is_a_parameter() -> None:
    decision = decide_time_slice(ratio=6, workload_kind=WorkloadKind.TRAINING, training_max_ratio=8)
    assert decision.warnings == ()
