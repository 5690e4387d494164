from __future__ import annotations

import pytest

from services.telemetry.adapters.sim import (
    SIMULATED_XIDS,
    FaultKind,
    FleetSpec,
    ProfileKind,
    SimFleet,
    UnknownGpu,
)
from services.telemetry.domain.metrics import GpuLost, GpuSample
from tests.unit.telemetry.conftest import T0, at, run


def train_on(fleet: SimFleet, index: int = 0) -> str:
    gpu = fleet.discovery(hostname="node-a").gpus[index].uuid
    fleet.assign_workload(gpu_uuid=gpu, workload_id=f"job-{index}", kind=ProfileKind.TRAINING, started_at=T0)
    return gpu


def reading(fleet: SimFleet, *, second: float, index: int = 0) -> GpuSample | GpuLost:
    return fleet.sample_node(hostname="node-a", now=at(second))[index]


@pytest.mark.parametrize("code", SIMULATED_XIDS)
def test_every_simulated_xid_is_reported_once_as_an_event(fleet: SimFleet, code: int) -> None:
    gpu = train_on(fleet)
    fleet.inject_fault(gpu_uuid=gpu, fault=FaultKind.XID, now=at(5), xid=code)
    events = fleet.poll_xids(hostname="node-a")
    assert [(e.gpu_uuid, e.xid, e.timestamp) for e in events] == [(gpu, code, at(5))]
    assert fleet.poll_xids(hostname="node-a") == []


def test_xid_79_makes_the_gpu_a_lost_reading_and_fails_its_workload(fleet: SimFleet) -> None:
    gpu = train_on(fleet)
    run(fleet, hostname="node-a", start_s=1, end_s=60)
    fleet.inject_fault(gpu_uuid=gpu, fault=FaultKind.FALL_OFF_BUS, now=at(61))
    lost = reading(fleet, second=62)
    assert isinstance(lost, GpuLost)
    assert "XID 79" in lost.reason
    reports = fleet.advance(now=at(62))
    assert [(r.workload_id, r.event, r.reason) for r in reports] == [("job-0", "failed", "XID 79")]
    assert isinstance(reading(fleet, second=63, index=1), GpuSample)


def test_a_recoverable_xid_leaves_the_workload_running(fleet: SimFleet) -> None:
    gpu = train_on(fleet)
    run(fleet, hostname="node-a", start_s=1, end_s=60)
    fleet.inject_fault(gpu_uuid=gpu, fault=FaultKind.XID, now=at(61), xid=63)
    assert fleet.advance(now=at(62)) == []
    assert fleet.player.get("job-0") is not None


def test_an_ecc_burst_raises_the_single_bit_counter(fleet: SimFleet) -> None:
    gpu = train_on(fleet)
    fleet.inject_fault(gpu_uuid=gpu, fault=FaultKind.ECC_BURST, now=at(1))
    sample = reading(fleet, second=2)
    assert isinstance(sample, GpuSample)
    assert sample.ecc_sbe_total is not None
    assert 50 <= sample.ecc_sbe_total <= 500


def test_thermal_runaway_throttles_then_drops_the_gpu_off_the_bus(fleet: SimFleet) -> None:
    gpu = train_on(fleet)
    run(fleet, hostname="node-a", start_s=1, end_s=60)
    fleet.inject_fault(gpu_uuid=gpu, fault=FaultKind.THERMAL_RUNAWAY, now=at(60))
    names: set[str] = set()
    second = 61
    while isinstance(r := reading(fleet, second=second), GpuSample) and second < 600:
        names.update(r.throttle_names)
        fleet.advance(now=at(second))
        second += 1
    assert "hw_thermal_slowdown" in names
    assert isinstance(reading(fleet, second=second + 1), GpuLost)
    assert [e.xid for e in fleet.poll_xids(hostname="node-a")] == [79]


def test_power_capping_limits_draw_and_reports_the_reason(fleet: SimFleet) -> None:
    gpu = train_on(fleet)
    run(fleet, hostname="node-a", start_s=1, end_s=60)
    fleet.inject_fault(gpu_uuid=gpu, fault=FaultKind.POWER_CAP, now=at(60))
    sample = reading(fleet, second=61)
    assert isinstance(sample, GpuSample)
    assert sample.power_limit_w == 350
    assert sample.power_w == 350
    assert "sw_power_cap" in sample.throttle_names
    assert sample.sm_clock_mhz is not None
    assert sample.sm_clock_mhz < 1980


def test_pcie_saturation_fills_the_link_and_starves_the_sms(fleet: SimFleet) -> None:
    gpu = train_on(fleet)
    run(fleet, hostname="node-a", start_s=1, end_s=80)
    fleet.inject_fault(gpu_uuid=gpu, fault=FaultKind.PCIE_SATURATION, now=at(80))
    run(fleet, hostname="node-a", start_s=81, end_s=100)
    sample = reading(fleet, second=101)
    assert isinstance(sample, GpuSample)
    assert sample.pcie_rx_bytes_per_s is not None
    assert sample.pcie_rx_bytes_per_s >= 0.95 * 50e9
    assert sample.sm_util_pct is not None
    assert sample.sm_util_pct < 45


def test_a_memory_leak_grows_memory_until_the_job_dies_of_oom(fleet: SimFleet) -> None:
    gpu = train_on(fleet)
    run(fleet, hostname="node-a", start_s=1, end_s=120)
    # A leak far faster than the default creep (30% of the card a minute), so the OOM comes within seconds.
    fleet.inject_fault(gpu_uuid=gpu, fault=FaultKind.MEMORY_LEAK, now=at(120), leak_pct_per_min=30)
    failures = []
    peak = 0
    for second in range(121, 600):
        failures += [r for r in fleet.advance(now=at(second)) if r.event == "failed"]
        sample = reading(fleet, second=second)
        assert isinstance(sample, GpuSample)
        assert sample.fb_used_bytes is not None
        peak = max(peak, sample.fb_used_bytes)
        if failures:
            break
    assert [(r.workload_id, r.reason) for r in failures] == [("job-0", "CUDA out of memory")]
    assert peak > 0.95 * 80 * 1024**3


def test_clearing_faults_brings_a_lost_gpu_back(fleet: SimFleet) -> None:
    gpu = train_on(fleet)
    fleet.inject_fault(gpu_uuid=gpu, fault=FaultKind.FALL_OFF_BUS, now=at(1))
    fleet.clear_faults(gpu_uuid=gpu)
    assert isinstance(reading(fleet, second=2), GpuSample)


def test_commands_for_unknown_gpus_are_refused(fleet: SimFleet) -> None:
    with pytest.raises(UnknownGpu):
        fleet.inject_fault(gpu_uuid="GPU-nope", fault=FaultKind.XID, now=at(1), xid=13)


def test_faults_arrive_at_the_configured_random_rate() -> None:
    spec = FleetSpec.uniform(nodes=1, model="H100", gpus_per_node=8, seed=11).model_copy(
        update={"fault_rate_per_gpu_hour": 360.0}  # 0.1 per GPU-second: ~48 faults over 60 s x 8 GPUs
    )
    fleet = SimFleet(spec=spec, start=T0)
    xids = 0
    for second in range(1, 61):
        fleet.sample_node(hostname="sim-node-0000", now=at(second))
        xids += len(fleet.poll_xids(hostname="sim-node-0000"))
    assert 5 <= xids <= 60
