"""The simulator's tensor-core activity: each workload's share of its SM time, 0 idle, None without cores."""

from __future__ import annotations

import random

import pytest

from services.telemetry.adapters.sim import FleetSpec, GpuGroup, NodeSpec, ProfileKind, SimFleet
from services.telemetry.adapters.sim.gpu import SimGpu, combine, read, step, values
from services.telemetry.adapters.sim.physics import IDLE, PROFILES, Load
from services.telemetry.domain.gpu_models import GPU_MODELS
from services.telemetry.domain.metrics import GpuSample
from tests.unit.telemetry.conftest import T0, at, run


def _fleet() -> SimFleet:
    node = NodeSpec(hostname="n", gpus=(GpuGroup(model="H100", count=3), GpuGroup(model="P100", count=1)))
    return SimFleet(spec=FleetSpec(nodes=(node,), seed=5), start=T0)


def _samples(fleet: SimFleet, second: int) -> list[GpuSample]:
    readings = fleet.sample_node(hostname="n", now=at(second))
    assert all(isinstance(r, GpuSample) for r in readings)
    return [r for r in readings if isinstance(r, GpuSample)]


def test_a_training_job_keeps_its_tensor_share_of_the_sm_time_and_an_idle_gpu_reads_zero() -> None:
    fleet = _fleet()
    gpus = [g.uuid for g in fleet.discovery(hostname="n").gpus]
    fleet.assign_workload(gpu_uuid=gpus[0], workload_id="t", kind=ProfileKind.TRAINING, started_at=T0)
    fleet.assign_workload(gpu_uuid=gpus[1], workload_id="i", kind=ProfileKind.INFERENCE, started_at=T0)
    run(fleet, hostname="n", start_s=1, end_s=120)
    training, inference, idle, _ = _samples(fleet, 121)
    for sample, kind in ((training, ProfileKind.TRAINING), (inference, ProfileKind.INFERENCE)):
        assert sample.sm_util_pct is not None
        share = PROFILES[kind].tensor_share
        assert sample.tensor_active_pct == pytest.approx(sample.sm_util_pct * share, abs=0.1)
    assert training.tensor_active_pct is not None
    assert training.tensor_active_pct > 40
    assert idle.tensor_active_pct == 0.0  # measured idle, never "unknown"


def test_a_gpu_without_tensor_cores_reports_none_even_while_training() -> None:
    fleet = _fleet()
    p100 = fleet.discovery(hostname="n").gpus[3].uuid
    fleet.assign_workload(gpu_uuid=p100, workload_id="w", kind=ProfileKind.TRAINING, started_at=T0)
    run(fleet, hostname="n", start_s=1, end_s=120)
    sample = _samples(fleet, 121)[3]
    assert sample.sm_util_pct is not None
    assert sample.sm_util_pct > 75
    assert sample.tensor_active_pct is None
    row = fleet.sample_node_values(hostname="n", now=at(121))[3]
    assert isinstance(row, tuple)
    assert row[-1] is None  # the fast path's last value, left out of the JSON as None is


def test_workloads_sharing_a_gpu_add_their_tensor_time_weighted_by_their_sm_time() -> None:
    training = Load(60.0, 30.0, 0.0, 0.3, tensor_share=0.5)
    notebook = Load(20.0, 5.0, 0.0, 0.1, tensor_share=0.1)
    shared = combine([training, notebook])
    assert shared.sm_pct * shared.tensor_share == pytest.approx(60 * 0.5 + 20 * 0.1)
    assert combine([IDLE, IDLE]).tensor_share == 0.0


def test_the_values_row_and_the_reading_carry_the_same_tensor_activity() -> None:
    gpu = SimGpu(uuid="GPU-x", node="n", index=0, spec=GPU_MODELS["H200"], t=0.0, rng=random.Random(1))
    for t in range(1, 30):
        step(gpu, t=float(t), load=Load(90.0, 50.0, 0.0, 0.5, tensor_share=0.5))
    reading = read(gpu, now=at(30))
    assert isinstance(reading, GpuSample)
    assert values(gpu)[-1] == reading.tensor_active_pct
    assert reading.tensor_active_pct == pytest.approx(0.5 * (reading.sm_util_pct or 0.0), abs=0.1)
