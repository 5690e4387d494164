from __future__ import annotations

import pytest

from services.telemetry.adapters.sim import FleetSpec, ProfileKind, SimFleet
from services.telemetry.adapters.sim.physics import lag, power_draw_w, steady_temp_c
from services.telemetry.domain.metrics import GpuSample
from tests.unit.telemetry.conftest import T0, at, run


def gpu_sample(fleet: SimFleet, *, hostname: str, index: int, second: float) -> GpuSample:
    reading = fleet.sample_node(hostname=hostname, now=at(second))[index]
    assert isinstance(reading, GpuSample)
    return reading


def test_first_order_lag_closes_63_percent_of_the_gap_in_one_time_constant() -> None:
    assert lag(current=0.0, target=100.0, dt_s=30.0, tau_s=30.0) == pytest.approx(63.2, abs=0.1)
    assert lag(current=5.0, target=100.0, dt_s=0.0, tau_s=30.0) == 5.0


def test_power_grows_with_activity_between_idle_and_limit() -> None:
    idle = power_draw_w(sm_pct=0, mem_util_pct=0, idle_w=80, limit_w=700)
    busy = power_draw_w(sm_pct=100, mem_util_pct=100, idle_w=80, limit_w=700)
    assert (idle, busy) == (80, 700)


def test_failing_cooling_raises_the_steady_temperature() -> None:
    healthy = steady_temp_c(power_w=700, limit_w=700, cooling=1.0)
    failing = steady_temp_c(power_w=700, limit_w=700, cooling=0.35)
    assert 70 < healthy < 80
    assert failing > 120


def test_the_same_seed_gives_the_same_uuids_and_readings() -> None:
    spec = FleetSpec.uniform(nodes=2, model="H200", seed=3)
    a, b = SimFleet(spec=spec, start=T0), SimFleet(spec=spec, start=T0)
    for fleet in (a, b):
        gpu = fleet.discovery(hostname="sim-node-0000").gpus[0].uuid
        fleet.assign_workload(gpu_uuid=gpu, workload_id="w", kind=ProfileKind.TRAINING, started_at=T0)
        run(fleet, hostname="sim-node-0000", start_s=1, end_s=60)
    assert a.sample_node(hostname="sim-node-0000", now=at(61)) == b.sample_node(
        hostname="sim-node-0000", now=at(61)
    )


def test_discovery_lists_every_gpu_with_bus_ids_and_nvlink_peers(fleet: SimFleet) -> None:
    node = fleet.discovery(hostname="node-a")
    assert [g.index for g in node.gpus] == [0, 1, 2, 3]
    assert len({g.uuid for g in node.gpus}) == 4
    assert len(node.gpus[0].nvlink_peers) == 3
    assert node.gpus[0].mig_enabled is False
    pcie_only = fleet.discovery(hostname="node-b")
    assert [g.model_name for g in pcie_only.gpus] == ["NVIDIA L4", "NVIDIA L4", "NVIDIA T4"]
    assert all(g.nvlink_peers == () and g.mig_enabled is None for g in pcie_only.gpus)


def test_an_idle_gpu_sits_at_idle_power_clocks_and_near_ambient(fleet: SimFleet) -> None:
    run(fleet, hostname="node-a", start_s=1, end_s=300)
    sample = gpu_sample(fleet, hostname="node-a", index=0, second=301)
    assert sample.sm_util_pct == 0.0
    assert sample.power_w == pytest.approx(80, abs=1)
    assert sample.sm_clock_mhz == 345
    assert sample.throttle_names == ("gpu_idle",)
    assert sample.gpu_temp_c is not None
    assert sample.gpu_temp_c < 40


def test_utilisation_follows_a_training_job_once_it_has_started(fleet: SimFleet) -> None:
    gpu = fleet.discovery(hostname="node-a").gpus[1].uuid
    fleet.assign_workload(gpu_uuid=gpu, workload_id="w", kind=ProfileKind.TRAINING, started_at=T0)
    run(fleet, hostname="node-a", start_s=1, end_s=30)
    starting = gpu_sample(fleet, hostname="node-a", index=1, second=31)
    run(fleet, hostname="node-a", start_s=32, end_s=120)
    running = gpu_sample(fleet, hostname="node-a", index=1, second=121)
    assert starting.sm_util_pct is not None
    assert starting.sm_util_pct < 10
    assert running.sm_util_pct is not None
    assert running.sm_util_pct > 75
    assert gpu_sample(fleet, hostname="node-a", index=0, second=122).sm_util_pct == 0.0


def test_temperature_follows_power_with_thermal_lag(fleet: SimFleet) -> None:
    gpu = fleet.discovery(hostname="node-a").gpus[0].uuid
    fleet.assign_workload(gpu_uuid=gpu, workload_id="w", kind=ProfileKind.TRAINING, started_at=T0)
    run(fleet, hostname="node-a", start_s=1, end_s=55)
    early = gpu_sample(fleet, hostname="node-a", index=0, second=56)
    run(fleet, hostname="node-a", start_s=57, end_s=400)
    late = gpu_sample(fleet, hostname="node-a", index=0, second=401)
    assert early.power_w is not None
    assert late.power_w is not None
    assert early.power_w > 500
    assert early.gpu_temp_c is not None
    assert late.gpu_temp_c is not None
    assert early.gpu_temp_c < late.gpu_temp_c - 10  # power jumped at once, heat took minutes
    assert 65 < late.gpu_temp_c < 80
    assert late.mem_temp_c is not None
    assert late.mem_temp_c > late.gpu_temp_c


def test_memory_grows_with_the_job_to_a_plateau(fleet: SimFleet) -> None:
    gpu = fleet.discovery(hostname="node-a").gpus[0].uuid
    fleet.assign_workload(gpu_uuid=gpu, workload_id="w", kind=ProfileKind.TRAINING, started_at=T0)
    used = []
    for second in range(1, 601):
        fleet.advance(now=at(second))
        reading = fleet.sample_node(hostname="node-a", now=at(second))[0]
        assert isinstance(reading, GpuSample)
        assert reading.fb_used_bytes is not None
        used.append(reading.fb_used_bytes)
    assert used[60] < used[200] <= used[599] * 1.001
    assert used[599] == pytest.approx(used[500], rel=0.01)
    assert 0.7 < used[599] / (80 * 1024**3) < 0.85
