"""Simulated GPU fleet for machines without GPUs: the embedded default and the tests."""

from services.telemetry.sim.faults import SIMULATED_XIDS, FaultKind
from services.telemetry.sim.fleet import SimFleet, UnknownGpu
from services.telemetry.sim.physics import ProfileKind
from services.telemetry.sim.probe import SimProbe
from services.telemetry.sim.spec import FleetSpec, GpuGroup, NodeSpec
from services.telemetry.sim.workloads import Phase, WorkloadReport

__all__ = [
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
