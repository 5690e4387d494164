from __future__ import annotations

from datetime import timedelta
from typing import Any

from services.recovery.domain.correlate import (
    THROTTLE_HW_THERMAL,
    THROTTLE_SW_POWER_CAP,
    Cause,
    FaultContext,
    RecentFault,
    TelemetrySample,
    diagnose,
)
from tests.unit.recovery.conftest import T0

FAULT = FaultContext(gpu="GPU-a", node="node-1", workload_ids=("wl-1",), at=T0)
CALM: dict[str, Any] = {
    "sm_util_pct": 60.0,
    "fb_used_pct": 50.0,
    "pcie_tx_bytes_per_s": 2e9,
    "pcie_rx_bytes_per_s": 2e9,
    "gpu_temp_c": 60.0,
    "power_w": 300.0,
    "power_limit_w": 700.0,
    "throttle_reasons": 0,
    "xid_count": 0,
}


def window(seconds: int = 10, gpu: str = "GPU-a", hot_from: int = 0, **hot: Any) -> list[TelemetrySample]:
    """Per-second samples before the fault; from second hot_from on, the given fields take the hot values."""
    return [
        TelemetrySample(
            gpu=gpu, at=T0 - timedelta(seconds=seconds - i), **(CALM | (hot if i >= hot_from else {}))
        )
        for i in range(seconds)
    ]


def test_a_calm_window_and_no_other_faults_gives_an_unknown_cause() -> None:
    diagnosis = diagnose(fault=FAULT, own_samples=window())
    assert diagnosis.probable_cause is Cause.UNKNOWN
    assert diagnosis.confidence == 0.0
    assert diagnosis.findings == ()


def test_sustained_pcie_saturation_is_found_with_its_peak() -> None:
    diagnosis = diagnose(fault=FAULT, own_samples=window(pcie_rx_bytes_per_s=31e9))
    assert diagnosis.probable_cause is Cause.PCIE_SATURATION
    (finding,) = diagnosis.findings
    assert finding.rule == "pcie_saturation"
    assert finding.evidence["peak_bytes_per_s"] == 31e9
    assert finding.evidence["share"] == 1.0
    assert finding.confidence == 0.9


def test_a_brief_pcie_spike_is_not_a_cause() -> None:
    diagnosis = diagnose(fault=FAULT, own_samples=window(hot_from=8, pcie_tx_bytes_per_s=31e9))
    assert diagnosis.probable_cause is Cause.UNKNOWN


def test_thermal_throttle_bits_point_at_thermal_throttling() -> None:
    diagnosis = diagnose(fault=FAULT, own_samples=window(hot_from=4, throttle_reasons=THROTTLE_HW_THERMAL))
    assert diagnosis.probable_cause is Cause.THERMAL_THROTTLING
    assert diagnosis.findings[0].evidence["share"] == 0.6


def test_a_temperature_past_the_slowdown_point_counts_as_thermal_throttling() -> None:
    diagnosis = diagnose(fault=FAULT, own_samples=window(gpu_temp_c=92.0))
    assert diagnosis.probable_cause is Cause.THERMAL_THROTTLING
    assert diagnosis.findings[0].evidence["max_temp_c"] == 92.0


def test_drawing_at_the_power_limit_points_at_power_capping() -> None:
    diagnosis = diagnose(fault=FAULT, own_samples=window(power_w=699.0))
    assert diagnosis.probable_cause is Cause.POWER_CAPPING
    assert diagnosis.findings[0].evidence["power_limit_w"] == 700.0


def test_the_power_cap_throttle_bit_points_at_power_capping() -> None:
    diagnosis = diagnose(fault=FAULT, own_samples=window(throttle_reasons=THROTTLE_SW_POWER_CAP))
    assert diagnosis.probable_cause is Cause.POWER_CAPPING


def test_memory_near_full_points_at_memory_exhaustion() -> None:
    diagnosis = diagnose(fault=FAULT, own_samples=window(fb_used_pct=99.5))
    assert diagnosis.probable_cause is Cause.MEMORY_EXHAUSTION
    assert diagnosis.findings[0].evidence["max_fb_used_pct"] == 99.5


def test_every_rule_that_fires_is_listed_as_evidence() -> None:
    diagnosis = diagnose(fault=FAULT, own_samples=window(fb_used_pct=99.0, gpu_temp_c=95.0))
    assert {f.cause for f in diagnosis.findings} == {Cause.MEMORY_EXHAUSTION, Cause.THERMAL_THROTTLING}


def test_other_gpus_on_the_node_failing_point_at_the_node() -> None:
    peer_fault = RecentFault(fault_type="xid_74", gpu="GPU-b", node="node-1", workload_ids=("wl-9",), at=T0)
    peers = window(gpu="GPU-c", hot_from=9, xid_count=1)
    diagnosis = diagnose(fault=FAULT, own_samples=window(), peer_samples=peers, recent_faults=[peer_fault])
    assert diagnosis.probable_cause is Cause.NODE_OR_INTERCONNECT
    (finding,) = diagnosis.findings
    assert finding.evidence["failing_peers"] == 2
    assert finding.evidence["peers"] == "GPU-b,GPU-c"
    assert finding.confidence == 0.8


def test_the_same_workload_failing_on_other_gpus_points_at_the_application() -> None:
    elsewhere = [
        RecentFault(
            fault_type="xid_13",
            gpu="GPU-x",
            node="node-7",
            workload_ids=("wl-1",),
            at=T0 - timedelta(minutes=2),
        ),
        RecentFault(
            fault_type="xid_13",
            gpu="GPU-y",
            node="node-8",
            workload_ids=("wl-1",),
            at=T0 - timedelta(minutes=1),
        ),
    ]
    diagnosis = diagnose(fault=FAULT, own_samples=window(), recent_faults=elsewhere)
    assert diagnosis.probable_cause is Cause.APPLICATION_BUG
    assert diagnosis.confidence == 0.9
    assert diagnosis.findings[0].evidence == {"other_gpus": 2, "gpus": "GPU-x,GPU-y", "workloads": "wl-1"}


def test_a_multi_gpu_workload_failing_on_a_neighbour_is_blamed_on_the_application_not_the_node() -> None:
    neighbour = RecentFault(fault_type="xid_31", gpu="GPU-b", node="node-1", workload_ids=("wl-1",), at=T0)
    diagnosis = diagnose(fault=FAULT, own_samples=window(), recent_faults=[neighbour])
    assert [f.cause for f in diagnosis.findings] == [Cause.APPLICATION_BUG]


def test_faults_outside_the_recent_window_are_not_evidence() -> None:
    old = RecentFault(fault_type="xid_74", gpu="GPU-b", node="node-1", at=T0 - timedelta(hours=1))
    assert diagnose(fault=FAULT, own_samples=window(), recent_faults=[old]).probable_cause is Cause.UNKNOWN


def test_earlier_faults_on_the_same_gpu_are_not_evidence_of_a_node_problem() -> None:
    own = RecentFault(fault_type="xid_74", gpu="GPU-a", node="node-1", at=T0 - timedelta(minutes=1))
    assert diagnose(fault=FAULT, own_samples=window(), recent_faults=[own]).findings == ()


def test_a_strong_relational_finding_outranks_a_metric_finding() -> None:
    elsewhere = [
        RecentFault(fault_type="xid_13", gpu=f"GPU-{n}", node="node-9", workload_ids=("wl-1",), at=T0)
        for n in range(3)
    ]
    diagnosis = diagnose(
        fault=FAULT, own_samples=window(hot_from=5, fb_used_pct=99.0), recent_faults=elsewhere
    )
    assert diagnosis.probable_cause is Cause.APPLICATION_BUG
    assert len(diagnosis.findings) == 2
