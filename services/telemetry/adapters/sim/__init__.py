"""Simulated GPU fleet for machines without GPUs: the embedded default and the tests."""

from services.telemetry.adapters.sim.faults import DEFAULT_LEAK_PCT_PER_MIN, SIMULATED_XIDS, FaultKind
from services.telemetry.adapters.sim.fleet import SimFleet, UnknownGpu
from services.telemetry.adapters.sim.physics import ProfileKind
from services.telemetry.adapters.sim.probe import SimProbe
from services.telemetry.adapters.sim.spec import FleetSpec, GpuGroup, NodeSpec
from services.telemetry.adapters.sim.workloads import Phase, WorkloadReport

__all__ = [
    "DEFAULT_LEAK_PCT_PER_MIN",
    "SIMULATED_XIDS",
    "FaultKind",
    "FleetSpec",
    "GpuGroup",
    "NodeSpec",
    "Phase",
    "ProfileKind",
    "SimFleet",
    "SimProbe",
    "UnknownGpu",
    "WorkloadReport",
]
