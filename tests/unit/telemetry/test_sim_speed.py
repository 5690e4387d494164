"""A faster simulated fleet (TELEMETRY_SIM_SPEED): start-up, migration and physics scale; clocks do not."""

from __future__ import annotations

from services.telemetry.adapters.sim import FleetSpec, SimFleet
from services.telemetry.adapters.sim.faults import FaultKind
from services.telemetry.adapters.sim.ids import gpu_uuid
from services.telemetry.adapters.sim.physics import ProfileKind
from tests.unit.telemetry.conftest import T0, at

H100 = FleetSpec.uniform(nodes=1, model="H100", gpus_per_node=2, prefix="n")
GPU0, GPU1 = gpu_uuid(hostname="n-0000", index=0), gpu_uuid(hostname="n-0000", index=1)


def _tick(fleet: SimFleet, *, start_s: int, end_s: int) -> list[str]:
    events = []
    for second in range(start_s, end_s + 1):
        events += [f"{r.event}:{r.phase}" for r in fleet.advance(now=at(second))]
        fleet.sample_node(hostname="n-0000", now=at(second))
    return events


def test_a_five_times_faster_fleet_starts_a_training_job_after_a_fifth_of_its_start_up_delay() -> None:
    fleet = SimFleet(spec=H100, start=T0, speed=5)
    fleet.assign_workload(gpu_uuid=GPU0, workload_id="w", kind=ProfileKind.TRAINING, started_at=T0)
    assert _tick(fleet, start_s=0, end_s=8) == []
    assert _tick(fleet, start_s=9, end_s=9) == ["started:None"]


def test_a_faster_fleet_migrates_in_a_fraction_of_the_time_and_keeps_wall_clock_timestamps() -> None:
    slow, fast = SimFleet(spec=H100, start=T0), SimFleet(spec=H100, start=T0, speed=10)
    for fleet in (slow, fast):
        fleet.assign_workload(gpu_uuid=GPU0, workload_id="w", kind=ProfileKind.INTERACTIVE, started_at=T0)
        _tick(fleet, start_s=0, end_s=1)
        fleet.migrate_workload(workload_id="w", target_gpu_uuid=GPU1, now=at(1))
    fast_done = [e for e in _tick(fast, start_s=2, end_s=12) if e == "progress:running"]
    slow_done = [e for e in _tick(slow, start_s=2, end_s=12) if e == "progress:running"]
    assert (fast_done, slow_done) == (["progress:running"], [])
    assert fast.sample_node(hostname="n-0000", now=at(13))[0].timestamp == at(13)


def test_a_memory_leak_fills_a_faster_fleets_gpu_sooner() -> None:
    slow, fast = SimFleet(spec=H100, start=T0), SimFleet(spec=H100, start=T0, speed=5)
    for fleet in (slow, fast):
        fleet.assign_workload(gpu_uuid=GPU0, workload_id="w", kind=ProfileKind.INFERENCE, started_at=T0)
        fleet.inject_fault(gpu_uuid=GPU0, fault=FaultKind.MEMORY_LEAK, now=T0, leak_pct_per_min=30)
        _tick(fleet, start_s=0, end_s=20)
    assert fast.gpu(GPU0).fb_used > 1.5 * slow.gpu(GPU0).fb_used
