from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from services.telemetry.adapters.sim import FleetSpec, GpuGroup, NodeSpec, SimFleet

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@pytest.fixture
def fleet() -> SimFleet:
    spec = FleetSpec(
        nodes=(
            NodeSpec(hostname="node-a", gpus=(GpuGroup(model="H100", count=4),)),
            NodeSpec(hostname="node-b", gpus=(GpuGroup(model="L4", count=2), GpuGroup(model="T4", count=1))),
        ),
        seed=7,
    )
    return SimFleet(spec=spec, start=T0)


def run(fleet: SimFleet, *, hostname: str, start_s: int, end_s: int) -> None:
    """Tick a node once per simulated second, as the agent does."""
    for second in range(start_s, end_s + 1):
        fleet.advance(now=at(second))
        fleet.sample_node(hostname=hostname, now=at(second))
