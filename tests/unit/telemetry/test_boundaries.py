"""Conventions that keep the simulator clock-free and the core cheap (layering: tests/unit/architecture)."""

from __future__ import annotations

import timeit
from pathlib import Path

from services.telemetry.adapters.sim import FleetSpec, ProfileKind, SimFleet
from services.telemetry.domain.gpu_models import GPU_MODELS, model_for_name
from tests.unit.telemetry.conftest import T0, at

PACKAGE = Path(__file__).resolve().parents[3] / "services" / "telemetry"


def test_the_simulator_never_reads_the_clock() -> None:
    for path in (PACKAGE / "adapters" / "sim").rglob("*.py"):
        source = path.read_text()
        assert ".now(" not in source, path
        assert "time.time" not in source, path


def test_nvml_product_names_resolve_to_model_specs() -> None:
    assert model_for_name("NVIDIA H200") is GPU_MODELS["H200"]
    assert model_for_name("NVIDIA A100-SXM4-40GB") is GPU_MODELS["A100-40GB"]
    assert model_for_name("NVIDIA L40S") is GPU_MODELS["L40S"]
    assert model_for_name("NVIDIA L4") is GPU_MODELS["L4"]
    assert model_for_name("Quadro Mystery") is None


def test_sampling_a_busy_node_of_eight_gpus_stays_far_under_a_millisecond_budget() -> None:
    fleet = SimFleet(spec=FleetSpec.uniform(nodes=1, model="H100"), start=T0)
    for gpu in fleet.discovery(hostname="sim-node-0000").gpus:
        fleet.assign_workload(
            gpu_uuid=gpu.uuid, workload_id=gpu.uuid, kind=ProfileKind.TRAINING, started_at=T0
        )
    fleet.advance(now=at(60))
    ticks = iter(range(61, 10_000))
    per_call = timeit.timeit(
        lambda: fleet.sample_node(hostname="sim-node-0000", now=at(next(ticks))), number=200
    )
    # Measured ~0.2 ms; the bound is loose because two shared cores run the whole suite.
    assert per_call / 200 < 0.005
