"""What the node agent reports: discovery for inventory, workload progress for the scheduler."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from libs.common.events import topics
from libs.common.events.base import Event

TOPIC = topics.NODE_AGENT


class DiscoveredMigInstance(BaseModel):
    """A MIG instance as NVML reports it."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    profile: str = Field(description="Profile name, e.g. 1g.10gb.")
    slot: int | None = Field(default=None, description="Placement start slot, when known.")
    uuid: str | None = Field(default=None, description="MIG device UUID.")


class DiscoveredGpu(BaseModel):
    """One GPU as the node agent sees it."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    uuid: str = Field(description="NVML UUID.")
    index: int = Field(description="Index on the node.")
    model: str = Field(description="Catalog model name, e.g. H100-80GB-SXM.")
    memory_bytes: int = Field(description="Framebuffer size.")
    pci_bus_id: str | None = Field(default=None, description="PCIe bus id.")
    nvlink_peers: list[str] = Field(default_factory=list, description="UUIDs reachable over NVLink.")
    mig_enabled: bool = Field(default=False, description="MIG mode.")
    mig_instances: list[DiscoveredMigInstance] = Field(default_factory=list, description="MIG instances.")


class NodeDiscoveredV1(Event):
    """The agent (re)discovered its node's GPUs; re-discovery of the same facts changes nothing."""

    type: Literal["agent.node.discovered.v1"] = "agent.node.discovered.v1"
    node: str = Field(description="Hostname.")
    labels: dict[str, str] = Field(default_factory=dict, description="zone, region, edge, pool...")
    gpus: list[DiscoveredGpu] = Field(description="Every GPU on the node.")
    source: Literal["nvml", "simulated", "fleet-file"] = Field(description="Where the facts came from.")

    def subject(self) -> str:
        return self.node


ExitReason = Literal["succeeded", "failed", "oom_killed", "time_limit", "cancelled", "preempted"]


class _AgentWorkloadEvent(Event):
    workload_id: str = Field(description="Workload id.")
    tenant_id: str = Field(description="Owning tenant.")
    placement_id: str = Field(description="Placement the report is about.")
    node: str = Field(description="Reporting node.")
    at: datetime | None = Field(
        default=None,
        description="When it happened on the host, as the runner saw it (not when the report was sent). "
        "None from an agent before this field: the envelope time is the fact's then.",
    )

    def subject(self) -> str:
        return self.workload_id


class WorkloadStartedV1(_AgentWorkloadEvent):
    """The host started the workload."""

    type: Literal["agent.workload.started.v1"] = "agent.workload.started.v1"
    pid: int | None = Field(default=None, description="Process id on the host (process runner).")
    container_id: str | None = Field(default=None, description="Container id (container runners).")
    runner: str | None = Field(default=None, description="simulated, process or podman; None before it.")
    notes: list[str] = Field(
        default_factory=list,
        description="What the user should know of this start, one line each: memory not isolated (a "
        "time-sliced share without MPS), restarted from the start (a migration), the limits enforced or why "
        "not. Empty from an agent before this field.",
    )
    gpu_uuids: list[str] | None = Field(
        default=None,
        description="The devices the host actually gave the workload, read back after the start (the "
        "Kubernetes runner: the kubelet's device plugin chooses them), one per allocation, whole-GPU or MIG "
        "UUIDs; the scheduler moves the placement onto them when they differ from what it placed. None: "
        "exactly as placed (every other runner, and an agent before this field).",
    )


class WorkloadExitedV1(_AgentWorkloadEvent):
    """The workload's process ended on the host."""

    type: Literal["agent.workload.exited.v1"] = "agent.workload.exited.v1"
    outcome: Literal["completed", "failed"] = Field(description="How it ended.")
    reason: str = Field(default="", description="Exit detail.")
    exit_reason: ExitReason | None = Field(
        default=None,
        description="Why it ended, from the host: succeeded, failed, oom_killed, time_limit, cancelled or "
        "preempted. None from an agent or runner before this field (outcome and reason say it then).",
    )
    exit_code: int | None = Field(default=None, description="The process's exit status, if it exited.")
    signal: int | None = Field(default=None, description="The signal that ended it, if one did.")


class MigrationStepV1(_AgentWorkloadEvent):
    """Progress of moving a workload: checkpoint, transfer, restore, running."""

    type: Literal["agent.migration.step.v1"] = "agent.migration.step.v1"
    phase: Literal["checkpoint", "transfer", "restore", "running"] = Field(description="Current phase.")
    percent: int = Field(
        ge=0,
        le=100,
        description="Overall progress, never falling. The process runner: checkpoint 0-10, transfer 10-50 "
        "and restore 50-95 by the phase's bytes, running 100 (docs/executors.md); the simulator: by time.",
    )
    bytes_done: int | None = Field(
        default=None, description="Bytes of the checkpoint moved so far in this phase; None: not counted."
    )
    bytes_total: int | None = Field(
        default=None, description="Bytes of the checkpoint this phase moves in all; None: not counted."
    )
    restored: bool | None = Field(
        default=None,
        description="At running: True when it started from its checkpoint, False when it restarted from the "
        "start (note says why); None before running, or from a runner that does not say.",
    )
    note: str = Field(default="", description="What people should know of this step, e.g. why no restore.")


SimFault = Literal[
    "xid", "ecc_burst", "thermal_runaway", "power_cap", "pcie_saturation", "memory_leak", "fall_off_bus"
]
SimProfile = Literal["training", "inference", "interactive"]


class SimFaultRequestedV1(Event):
    """An admin asked the simulated fleet to inject a fault (a command to the agent owning the GPU)."""

    type: Literal["agent.simulator.fault_requested.v1"] = "agent.simulator.fault_requested.v1"
    command_id: str = Field(description="Unique id of the request.")
    gpu_uuid: str = Field(description="GPU to break.")
    fault: SimFault = Field(description="What to inject.")
    xid: int | None = Field(default=None, description="XID code when fault is xid (default 79).")
    leak_pct_per_min: float | None = Field(
        default=None,
        description="When fault is memory_leak: growth in % of the card's memory per simulated minute "
        "(None: the simulator's default creep, 90% to 100% in 8 minutes).",
    )
    survives_reset: bool = Field(
        default=False,
        description="The fault outlasts a GPU reset or node reboot (the GPU stays faulty after the action); "
        "False: the action clears it.",
    )

    def subject(self) -> str:
        return self.gpu_uuid


class WorkloadProfileSetV1(Event):
    """An admin changed how a simulated workload uses its GPUs (a command to the agent)."""

    type: Literal["agent.workload.profile_set.v1"] = "agent.workload.profile_set.v1"
    command_id: str = Field(description="Unique id of the request.")
    workload_id: str = Field(description="Workload to change.")
    profile: SimProfile = Field(description="New utilisation profile.")

    def subject(self) -> str:
        return self.workload_id


class HostActionRequestedV1(Event):
    """Recovery asked the node agent to reset a drained GPU or reboot a drained node (a command to the agent
    of ``node``); the health check that follows counts only readings the agent takes after it."""

    type: Literal["agent.host.action_requested.v1"] = "agent.host.action_requested.v1"
    command_id: str = Field(description="Unique id of the request (the incident's, with the action).")
    incident_id: str = Field(description="The incident the action recovers from.")
    node: str = Field(description="Hostname of the agent that carries it out.")
    gpu_uuid: str | None = Field(default=None, description="The GPU to reset; None for a node reboot.")
    action: Literal["reset_gpu", "reboot_node"] = Field(description="What to do.")

    def subject(self) -> str:
        return self.node


DeviceAction = Literal["reset_gpu", "reboot_node", "apply_mig"]


class HostActionDoneV1(Event):
    """The node agent carried out (or refused) a device action on its host: a GPU reset or node reboot
    recovery asked for, or a MIG layout inventory changed. Recovery escalates the incident of an action
    that failed or was refused."""

    type: Literal["agent.host.action_done.v1"] = "agent.host.action_done.v1"
    command_id: str = Field(
        description="The request's command_id (HostActionRequestedV1), or the partitions change's event id."
    )
    incident_id: str | None = Field(default=None, description="The incident it recovers from, if any.")
    node: str = Field(description="Hostname of the agent that carried it out.")
    gpu_uuid: str | None = Field(default=None, description="The GPU acted on; None for a node action.")
    action: DeviceAction = Field(description="What was done.")
    outcome: Literal["succeeded", "failed", "refused"] = Field(
        description="succeeded: every command exited 0; failed: one did not (or could not start); refused: "
        "nothing ran (the GPU busy, the layout invalid, the action not available on this host)."
    )
    reason: str = Field(default="", description="Why it failed or was refused, for people.")
    commands: list[list[str]] = Field(
        default_factory=list, description="Every command run, in order, as argv (empty when refused)."
    )
    exit_code: int | None = Field(
        default=None,
        description="Exit status of the last command run; None when none ran or it never started.",
    )
    output: str = Field(
        default="", description="What the commands printed (stdout then stderr), cut to 4 KiB."
    )
    at: datetime | None = Field(default=None, description="When it finished on the host.")

    def subject(self) -> str:
        return self.node


EVENTS: tuple[type[Event], ...] = (
    NodeDiscoveredV1,
    WorkloadStartedV1,
    WorkloadExitedV1,
    MigrationStepV1,
    SimFaultRequestedV1,
    WorkloadProfileSetV1,
    HostActionRequestedV1,
    HostActionDoneV1,
)
