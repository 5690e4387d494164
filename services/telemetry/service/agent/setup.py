"""What an agent process reads (NVML on a real host, or a simulated fleet from a fleet file) and what
runs its workloads (TELEMETRY_AGENT_RUNNER: the simulator, host processes, podman or Kubernetes Pods)."""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import shlex
import socket
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, Protocol

from lightkube import AsyncClient, KubeConfig

from libs.common.objectstore import open_store
from services.telemetry.adapters.devices import NvidiaSmiActions, SimDeviceActions
from services.telemetry.adapters.fleetfile import default_fleet, load_fleet_file
from services.telemetry.adapters.runner.kube_devices import (
    EnvironAssignedDevices,
    FirstOf,
    NvmlAssignedDevices,
)
from services.telemetry.adapters.runner.kubernetes import KubernetesRunner
from services.telemetry.adapters.runner.moves import Mover
from services.telemetry.adapters.runner.podman import (
    PodmanRunner,
    cdi_spec_dirs,
    has_nvidia_cdi,
    podman_runs_containers,
)
from services.telemetry.adapters.runner.process import ProcessRunner
from services.telemetry.adapters.runner.ship import Shipper
from services.telemetry.adapters.sim import SimFleet, SimProbe
from services.telemetry.domain.probe import GpuProbe, NodeDiscovery, ProbeError
from services.telemetry.service.agent.ports import DeviceActions
from services.telemetry.service.agent.runner import SimWorkloadRunner, WorkloadRunner

__all__ = [
    "AgentSetup",
    "DeviceSettings",
    "RunnerSettings",
    "SetupSettings",
    "host_runner",
    "kubernetes_runner",
    "nvidia_smi_actions",
    "nvml_setup",
    "process_runner",
    "resolve_setup",
    "simulated_setup",
    "with_runner",
    "workload_root",
]

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


class RunnerSettings(Protocol):
    """The settings that choose and configure the workload runner."""

    @property
    def agent_runner(self) -> Literal["auto", "simulated", "process", "podman", "kubernetes"]: ...
    @property
    def agent_kube_namespace(self) -> str: ...
    @property
    def agent_kube_config(self) -> Path | None: ...
    @property
    def agent_podman(self) -> str: ...
    @property
    def agent_podman_run_args(self) -> str: ...
    @property
    def agent_state_dir(self) -> Path | None: ...
    @property
    def agent_workload_dir(self) -> Path | None: ...
    @property
    def agent_log_quota_bytes(self) -> int: ...
    @property
    def agent_cgroup_root(self) -> Path | None: ...
    @property
    def object_store_url(self) -> str: ...
    @property
    def agent_output_cap_bytes(self) -> int: ...
    @property
    def agent_log_chunk_bytes(self) -> int: ...
    @property
    def agent_ship_give_up_s(self) -> float: ...
    @property
    def agent_restore_wait_s(self) -> float: ...


class DeviceSettings(Protocol):
    """The settings of device actions on real GPUs."""

    @property
    def agent_nvidia_smi(self) -> str: ...
    @property
    def agent_reboot_command(self) -> str: ...
    @property
    def agent_device_timeout_s(self) -> float: ...


class AgentSettingsForSetup(SetupSettings, RunnerSettings, DeviceSettings, Protocol):
    """All three."""


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
    devices: DeviceActions | None = None  # GPU reset, node reboot, MIG layouts; None: none on this host

    @property
    def gpus(self) -> frozenset[str]:
        """Every GPU uuid this agent reads."""
        return frozenset(g.uuid for d in self.discoveries.values() for g in d.gpus)

    @property
    def shipper(self) -> Shipper | None:
        """What ships the runs' logs and outputs off the host (the process or Kubernetes runner's), if any."""
        if isinstance(self.runner, ProcessRunner | KubernetesRunner):
            return self.runner.shipper
        return None

    @property
    def mover(self) -> Mover | None:
        """What carries migrating workloads' checkpoints through the object store, if anything."""
        return self.runner.mover if isinstance(self.runner, ProcessRunner) else None


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
        devices=SimDeviceActions(fleet=fleet, layouts=mig),
    )


async def nvml_setup(*, settings: AgentSettingsForSetup) -> AgentSetup:
    """The local host's GPUs through NVML; raises ProbeError when NVML cannot work here."""
    from services.telemetry.adapters.nvml_probe import NvmlProbe  # imports pynvml only where it is used

    probe = NvmlProbe(hostname=settings.agent_hostname or socket.gethostname())
    discovery = await probe.discover()
    return AgentSetup(
        source="nvml",
        probes={discovery.hostname: probe},
        discoveries={discovery.hostname: discovery},
        runner=process_runner(settings=settings, discoveries={discovery.hostname: discovery}),
        models={g.uuid: g.model_name for g in discovery.gpus},
        devices=nvidia_smi_actions(settings=settings),
    )


def nvidia_smi_actions(*, settings: DeviceSettings) -> NvidiaSmiActions:
    """Device actions by nvidia-smi and the configured reboot command (TELEMETRY_AGENT_NVIDIA_SMI,
    TELEMETRY_AGENT_REBOOT_COMMAND)."""
    nvidia_smi = shlex.split(settings.agent_nvidia_smi)
    if not nvidia_smi:
        raise ValueError("TELEMETRY_AGENT_NVIDIA_SMI is empty: it names the nvidia-smi command")
    return NvidiaSmiActions(
        nvidia_smi=nvidia_smi,
        reboot_command=shlex.split(settings.agent_reboot_command),
        timeout_s=settings.agent_device_timeout_s,
    )


async def resolve_setup(*, settings: AgentSettingsForSetup, clock: Callable[[], datetime]) -> AgentSetup:
    """TELEMETRY_AGENT_MODE: nvml, simulated, or auto (NVML if it initialises, else simulated); then
    TELEMETRY_AGENT_RUNNER picks what runs the workloads (with_runner)."""
    if settings.agent_mode == "simulated":
        return with_runner(await simulated_setup(settings=settings, clock=clock), settings=settings)
    try:
        return with_runner(await nvml_setup(settings=settings), settings=settings)
    except ProbeError as exc:
        if settings.agent_mode == "nvml":
            raise
        log.info("NVML unavailable (%s); simulating the fleet", exc)
        return with_runner(await simulated_setup(settings=settings, clock=clock), settings=settings)


def with_runner(setup: AgentSetup, *, settings: RunnerSettings) -> AgentSetup:
    """The setup with the runner TELEMETRY_AGENT_RUNNER asks for: auto is the simulator on a simulated
    fleet, on real GPUs podman where it can run them (host_runner), else the process runner; the simulator
    cannot play real GPUs."""
    choice = settings.agent_runner
    if choice == "auto":
        choice = "simulated" if setup.fleet is not None else host_runner(settings=settings)
    if choice == "simulated":
        if setup.fleet is None:
            raise ValueError(
                "TELEMETRY_AGENT_RUNNER=simulated needs a simulated fleet (TELEMETRY_AGENT_MODE)"
            )
        return setup
    if choice == "kubernetes":
        if isinstance(setup.runner, KubernetesRunner):
            return setup
        return dataclasses.replace(setup, runner=kubernetes_runner(settings=settings, setup=setup))
    if choice == "podman":
        if isinstance(setup.runner, PodmanRunner):
            return setup
        podman = {
            "podman": shlex.split(settings.agent_podman),
            "run_args": shlex.split(settings.agent_podman_run_args),
            "cdi": setup.fleet is None,  # a simulated fleet's GPU UUIDs name no device
        }
        runner = process_runner(settings=settings, discoveries=setup.discoveries, podman=podman)
        return dataclasses.replace(setup, runner=runner)
    if isinstance(setup.runner, ProcessRunner) and not isinstance(setup.runner, PodmanRunner):
        return setup
    return dataclasses.replace(setup, runner=process_runner(settings=settings, discoveries=setup.discoveries))


def workload_root(*, settings: RunnerSettings, discoveries: Mapping[str, NodeDiscovery]) -> Path:
    """This agent's run directories: one folder per agent (its nodes' names and a digest of its GPUs)
    under TELEMETRY_AGENT_WORKLOAD_DIR, else <AGENT_STATE_DIR>/workloads, else the temporary directory."""
    if settings.agent_workload_dir is not None:
        base = settings.agent_workload_dir
    elif settings.agent_state_dir is not None:
        base = settings.agent_state_dir / "workloads"
    else:
        base = Path(tempfile.gettempdir()) / "gpucloud-agent-workloads"
    gpus = sorted(g.uuid for d in discoveries.values() for g in d.gpus)
    digest = hashlib.sha256("\n".join(gpus).encode()).hexdigest()[:10]
    return base / f"{sorted(discoveries)[0] if discoveries else 'agent'}-{digest}"


def host_runner(
    *,
    settings: RunnerSettings,
    cdi_dirs: Sequence[Path] | None = None,
    probe: Callable[..., str | None] = podman_runs_containers,
) -> Literal["podman", "process"]:
    """auto on real GPUs: podman when a CDI spec names the GPUs and podman runs a container here (one
    container of the host's root, checked once at start), else the process runner."""
    if not has_nvidia_cdi(cdi_spec_dirs() if cdi_dirs is None else cdi_dirs):
        log.info("runner auto: no CDI spec for the GPUs (nvidia-ctk cdi generate): the process runner")
        return "process"
    why = probe(
        podman=shlex.split(settings.agent_podman), run_args=shlex.split(settings.agent_podman_run_args)
    )
    if why is not None:
        log.info("runner auto: %s: the process runner", why)
        return "process"
    return "podman"


def process_runner(
    *,
    settings: RunnerSettings,
    discoveries: Mapping[str, NodeDiscovery],
    podman: Mapping[str, Any] | None = None,
) -> ProcessRunner:
    """The process runner over these nodes' GPUs; with ``podman`` (PodmanRunner's options), the podman
    runner."""
    root = workload_root(settings=settings, discoveries=discoveries)
    if settings.agent_workload_dir is None and settings.agent_state_dir is None:
        log.warning("no TELEMETRY_AGENT_STATE_DIR: workload state under %s (lost with the temp dir)", root)
    shipper = Shipper(
        store=open_store(settings.object_store_url),
        root=root,
        chunk_bytes=settings.agent_log_chunk_bytes,
        output_cap_bytes=settings.agent_output_cap_bytes,
        give_up_s=settings.agent_ship_give_up_s,
    )
    make = ProcessRunner if podman is None else PodmanRunner
    return make(
        root=root,
        card_memory={g.uuid: g.memory_bytes for d in discoveries.values() for g in d.gpus if g.memory_bytes},
        log_quota_bytes=settings.agent_log_quota_bytes,
        cgroup_root=settings.agent_cgroup_root,
        shipper=shipper,
        mover=Mover(store=shipper.store, wait_s=settings.agent_restore_wait_s),
        **(podman or {}),
    )


def kubernetes_runner(*, settings: RunnerSettings, setup: AgentSetup) -> KubernetesRunner:
    """One Pod per placement on this agent's node (TELEMETRY_AGENT_KUBE_NAMESPACE), through the in-cluster
    service account or TELEMETRY_AGENT_KUBE_CONFIG; devices read back from the Pod's environment, else
    NVML."""
    if len(setup.discoveries) != 1:
        raise ValueError(
            "TELEMETRY_AGENT_RUNNER=kubernetes runs one node's Pods; "
            f"this agent reads {len(setup.discoveries)} nodes"
        )
    node = next(iter(setup.discoveries))
    path = settings.agent_kube_config
    config = KubeConfig.from_service_account() if path is None else KubeConfig.from_file(path)
    root = workload_root(settings=settings, discoveries=setup.discoveries)
    shipper = Shipper(
        store=open_store(settings.object_store_url),
        root=root,
        chunk_bytes=settings.agent_log_chunk_bytes,
        output_cap_bytes=settings.agent_output_cap_bytes,
        give_up_s=settings.agent_ship_give_up_s,
    )
    return KubernetesRunner(
        client=AsyncClient(config, namespace=settings.agent_kube_namespace),
        namespace=settings.agent_kube_namespace,
        node=node,
        root=root,
        devices=FirstOf(
            EnvironAssignedDevices(
                uuids_by_index={g.index: g.uuid for d in setup.discoveries.values() for g in d.gpus}
            ),
            NvmlAssignedDevices(),
        ),
        shipper=shipper,
    )
