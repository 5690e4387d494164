"""What an agent process reads: NVML on a real host, or a simulated fleet from a fleet file."""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Literal, Protocol

from services.telemetry.adapters.fleetfile import default_fleet, load_fleet_file
from services.telemetry.adapters.sim import SimFleet, SimProbe
from services.telemetry.domain.probe import GpuProbe, NodeDiscovery, ProbeError
from services.telemetry.service.agent.runner import RunnerReport, SimWorkloadRunner, WorkloadRunner

__all__ = ["AgentSetup", "LabelOnlyRunner", "SetupSettings", "nvml_setup", "resolve_setup", "simulated_setup"]

log = logging.getLogger(__name__)


class SetupSettings(Protocol):
    """The settings that choose what an agent reads (the service's settings have them)."""

    @property
    def agent_mode(self) -> Literal["auto", "nvml", "simulated"]: ...
    @property
    def fleet_file(self) -> Path | None: ...
    @property
    def sim_speed(self) -> float: ...
    @property
    def agent_hostname(self) -> str | None: ...


@dataclass
class AgentSetup:
    """The probes (one per node), the workload runner and the static facts the agent reports."""

    source: str  # "nvml" or "simulated"
    probes: Mapping[str, GpuProbe]
    discoveries: Mapping[str, NodeDiscovery]
    runner: WorkloadRunner
    labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    models: Mapping[str, str] = field(default_factory=dict)  # gpu uuid -> catalog model name
    mig: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # gpu uuid -> fleet-file MIG layout
    fleet: SimFleet | None = None

    @property
    def gpus(self) -> frozenset[str]:
        """Every GPU uuid this agent reads."""
        return frozenset(g.uuid for d in self.discoveries.values() for g in d.gpus)


class LabelOnlyRunner:
    """Real hosts: Kubernetes runs the Pods (see runner.py), so placements only label samples here."""

    def start(
        self,
        *,
        workload_id: str,
        gpu_uuids: Sequence[str],
        profile: str,
        duration_s: float | None,
        at: datetime,
    ) -> None:
        return None

    def stop(self, *, workload_id: str) -> None:
        return None

    def migrate(self, *, workload_id: str, target_gpu_uuids: Sequence[str], at: datetime) -> None:
        return None

    def set_profile(self, *, workload_id: str, profile: str) -> bool:
        return False

    def poll(self, *, now: datetime) -> list[RunnerReport]:
        return []


async def simulated_setup(*, settings: SetupSettings, clock: Callable[[], datetime]) -> AgentSetup:
    """A simulated fleet from TELEMETRY_FLEET_FILE (or two H100 nodes)."""
    spec = load_fleet_file(settings.fleet_file) if settings.fleet_file else default_fleet()
    fleet = SimFleet(spec=spec, start=clock(), speed=settings.sim_speed)
    probes = {h: SimProbe(fleet=fleet, hostname=h, clock=clock) for h in fleet.hostnames}
    discoveries = {h: await p.discover() for h, p in probes.items()}
    models: dict[str, str] = {}
    mig: dict[str, tuple[str, ...]] = {}
    for node in spec.nodes:
        uuids = iter(g.uuid for g in discoveries[node.hostname].gpus)
        for group in node.gpus:
            for _ in range(group.count):
                gpu = next(uuids)
                models[gpu] = group.catalog_model or group.model
                mig[gpu] = group.mig
    return AgentSetup(
        source="simulated",
        probes=probes,
        discoveries=discoveries,
        runner=SimWorkloadRunner(fleet=fleet),
        labels={n.hostname: n.labels for n in spec.nodes},
        models=models,
        mig=mig,
        fleet=fleet,
    )


async def nvml_setup(*, settings: SetupSettings) -> AgentSetup:
    """The local host's GPUs through NVML; raises ProbeError when NVML cannot work here."""
    from services.telemetry.adapters.nvml_probe import NvmlProbe  # imports pynvml only where it is used

    probe = NvmlProbe(hostname=settings.agent_hostname or socket.gethostname())
    discovery = await probe.discover()
    return AgentSetup(
        source="nvml",
        probes={discovery.hostname: probe},
        discoveries={discovery.hostname: discovery},
        runner=LabelOnlyRunner(),
        models={g.uuid: g.model_name for g in discovery.gpus},
    )


async def resolve_setup(*, settings: SetupSettings, clock: Callable[[], datetime]) -> AgentSetup:
    """TELEMETRY_AGENT_MODE: nvml, simulated, or auto (NVML if it initialises, else simulated)."""
    if settings.agent_mode == "simulated":
        return await simulated_setup(settings=settings, clock=clock)
    try:
        return await nvml_setup(settings=settings)
    except ProbeError as exc:
        if settings.agent_mode == "nvml":
            raise
        log.info("NVML unavailable (%s); simulating the fleet", exc)
        return await simulated_setup(settings=settings, clock=clock)
