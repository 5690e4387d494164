"""The fault request's leak rate: only for a memory leak, above 0 and at most 100% a minute."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from services.telemetry.api.schemas import FaultRequest


def test_a_memory_leak_request_carries_its_rate_and_defaults_to_none() -> None:
    assert FaultRequest(gpu_uuid="GPU-1", fault="memory_leak", leak_pct_per_min=30).leak_pct_per_min == 30
    assert FaultRequest(gpu_uuid="GPU-1", fault="memory_leak").leak_pct_per_min is None


@pytest.mark.parametrize("rate", [0, -1, 100.5])
def test_a_leak_rate_out_of_range_is_refused_naming_the_field(rate: float) -> None:
    with pytest.raises(ValidationError) as refused:
        FaultRequest(gpu_uuid="GPU-1", fault="memory_leak", leak_pct_per_min=rate)
    assert [e["loc"] for e in refused.value.errors()] == [("leak_pct_per_min",)]


def test_a_leak_rate_on_another_fault_is_refused_naming_the_field() -> None:
    with pytest.raises(ValidationError, match="leak_pct_per_min is only for fault 'memory_leak'"):
        FaultRequest(gpu_uuid="GPU-1", fault="ecc_burst", leak_pct_per_min=5)
