"""Workload lifecycle and allocations, keyed by workload id."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from libs.common.events import topics
from libs.common.events.base import Event

TOPIC = topics.SCHEDULER

WorkloadKind = Literal["instance", "job"]
PricingClass = Literal["on_demand", "spot", "reserved"]


class AllocationItem(BaseModel):
    """One GPU, MIG instance or time-sliced share held by a placement."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    gpu_uuid: str = Field(description="GPU held.")
    partition_id: str | None = Field(default=None, description="MIG instance or share; None = whole GPU.")
    units: Decimal = Field(description="Compute units held on this GPU.")
    model: str = Field(description="GPU model, for pricing.")
    profile: str | None = Field(default=None, description="MIG profile, for pricing.")
    memory_bytes: int | None = Field(
        default=None,
        description="Memory this item gives the workload: the whole GPU's, the MIG instance's, or a "
        "time-sliced share's GPU memory / ratio. None from a scheduler before this field.",
    )
    memory_isolated: bool | None = Field(
        default=None,
        description="False for a time-sliced share: without MPS nothing fences its memory off from the "
        "GPU's other shares, so memory_bytes is its fair part, not a limit. None as for memory_bytes.",
    )


class RunCheckpoint(BaseModel):
    """How a migrating workload is asked to checkpoint (docs/executors.md, "Migration").

    One of ``signal`` (sent to its process group) or ``command`` (run in its environment and working
    directory); it has checkpointed when it created ``$GPUCLOUD_CHECKPOINT_DIR/COMPLETE`` (or the command
    exited 0) within ``timeout_s``. The scheduler's API validates it; a reader takes what it gets.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    signal: str | None = Field(default=None, description="Signal name sent to ask for it, e.g. SIGUSR1.")
    command: list[str] | None = Field(default=None, description="Or a command that writes the checkpoint.")
    timeout_s: float = Field(default=60.0, description="How long the checkpoint may take before SIGTERM.")


class RunSpec(BaseModel):
    """What a workload runs on its host: image, command, environment and limits (docs/executors.md).

    ``command`` + ``args`` is the argv (Kubernetes' split: an image's entrypoint may be overridden by
    ``command`` alone); the process runner needs a command, a container runner falls back to the
    image's own entrypoint. Limits are enforced where the host allows (cgroups); ``grace_s`` is the
    wait between SIGTERM and SIGKILL on cancel and preemption.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    image: str | None = Field(default=None, description="OCI image reference, resolved from the catalog.")
    command: list[str] = Field(default_factory=list, description="Executable and its first arguments.")
    args: list[str] = Field(default_factory=list, description="Further arguments after command.")
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment variables.")
    working_dir: str | None = Field(default=None, description="Absolute working directory.")
    cpu_millis: int | None = Field(default=None, description="CPU limit in millicores (1000 = one core).")
    memory_bytes: int | None = Field(default=None, description="Host memory limit.")
    time_limit_s: float | None = Field(default=None, description="Killed with time_limit after this.")
    grace_s: float = Field(default=30.0, description="SIGTERM to SIGKILL wait on cancel or preemption.")
    checkpoint: RunCheckpoint | None = Field(
        default=None,
        description="How it checkpoints when migrated; None: it is not asked and restarts from the start.",
    )


class _WorkloadEvent(Event):
    workload_id: str = Field(description="Workload id.")
    tenant_id: str = Field(description="Owning tenant.")

    def subject(self) -> str:
        return self.workload_id


class WorkloadSubmittedV1(_WorkloadEvent):
    """A workload was accepted into the system."""

    type: Literal["scheduler.workload.submitted.v1"] = "scheduler.workload.submitted.v1"
    kind: WorkloadKind = Field(description="instance or job.")
    urgency: float = Field(description="0..1 as requested.")
    preemptible: bool = Field(default=False, description="May be preempted (spot).")
    pricing_class: PricingClass = Field(default="on_demand", description="How it is billed.")
    tags: dict[str, str] = Field(default_factory=dict, description="project, team, cost-center, free tags.")
    resources: dict[str, str | int] = Field(default_factory=dict, description="Requested resources.")


class WorkloadQueuedV1(_WorkloadEvent):
    """A workload waits for capacity."""

    type: Literal["scheduler.workload.queued.v1"] = "scheduler.workload.queued.v1"
    position: int = Field(description="1-based position in the tenant-visible queue.")
    priority: float = Field(description="Priority at the time of queueing.")
    estimated_start: datetime | None = Field(default=None, description="Best estimate, if any.")


class WorkloadPlacedV1(_WorkloadEvent):
    """A workload was given GPUs; the node agent starts it."""

    type: Literal["scheduler.workload.placed.v1"] = "scheduler.workload.placed.v1"
    placement_id: str = Field(description="Unique per placement; a migration makes a new one.")
    node: str = Field(description="Node of the first allocation (all of them for a same-node gang).")
    allocations: list[AllocationItem] = Field(description="Everything this placement holds.")
    kind: WorkloadKind = Field(description="instance or job.")
    profile: str = Field(default="training", description="training, inference or interactive.")
    pricing_class: PricingClass = Field(default="on_demand", description="How it is billed.")
    tags: dict[str, str] = Field(default_factory=dict, description="Tags for cost allocation.")
    duration_s: float | None = Field(default=None, description="Expected run time of a job, if known.")
    priority: float = Field(default=0.0, description="Priority it was placed with.")
    run: RunSpec | None = Field(
        default=None,
        description="What runs (image, command, env, limits); None: nothing to execute "
        "beyond the simulator's play (a scheduler before this field, or a spec without one).",
    )


class WorkloadRunningV1(_WorkloadEvent):
    """The node agent reported the workload running on its placement."""

    type: Literal["scheduler.workload.running.v1"] = "scheduler.workload.running.v1"
    placement_id: str = Field(description="The placement that runs.")
    node: str = Field(description="Node running it.")
    started_at: datetime | None = Field(
        default=None,
        description="When the host started it (the node agent's report, not when the scheduler read it); "
        "charges run from here. None only from a scheduler before this field: the envelope time then.",
    )


class WorkloadEndedV1(_WorkloadEvent):
    """A workload ended, and its placement, if it had one, released its GPUs; ``outcome`` says how."""

    type: Literal["scheduler.workload.ended.v1"] = "scheduler.workload.ended.v1"
    placement_id: str = Field(
        description="The placement that ended; empty when the workload ended before it was ever placed "
        "(cancelled while queued), so no GPU was held and nothing is to be released or charged."
    )
    outcome: Literal["completed", "failed", "cancelled", "preempted", "migrated", "reclaimed"] = Field(
        description="Why the placement ended."
    )
    reason: str = Field(default="", description="Human-readable detail.")
    requeued: bool = Field(default=False, description="True when the workload waits to be placed again.")
    ended_at: datetime | None = Field(
        default=None,
        description="When the placement ended: the host's exit (the node agent's report, not when the "
        "scheduler read it), or the scheduler's own decision for a cancel or a preemption; charges stop "
        "here. None for outcome migrated (the move ends when the workload runs on its new placement: that "
        "WorkloadRunningV1's started_at) and from a scheduler before this field (the envelope time then).",
    )


class WorkloadPreemptionScheduledV1(_WorkloadEvent):
    """A preemptible workload will be preempted at ``deadline`` unless it finishes first."""

    type: Literal["scheduler.workload.preemption_scheduled.v1"] = "scheduler.workload.preemption_scheduled.v1"
    placement_id: str = Field(description="Placement to be preempted.")
    deadline: datetime = Field(description="End of the grace period.")
    preempted_for: str = Field(description="Workload that needs the capacity.")


class WorkloadMigratingV1(_WorkloadEvent):
    """A workload moves from one placement to another (recovery or rebalancing)."""

    type: Literal["scheduler.workload.migrating.v1"] = "scheduler.workload.migrating.v1"
    from_placement_id: str = Field(description="Placement being left.")
    to_placement_id: str = Field(description="Placement being entered.")
    reason: str = Field(default="", description="Why.")
    incident_id: str | None = Field(default=None, description="Recovery incident, if any.")


class WorkloadReallocatedV1(_WorkloadEvent):
    """A running placement holds other devices of its node than it was placed on: the host gave it these
    (the Kubernetes device plugin chooses a Pod's GPUs), and every record of which GPU it holds follows.

    The placement id, its node, its units and its charges stay; only the devices change. A swap with
    another placement of the node, whose devices the host gave this one, comes as that placement's own
    event."""

    type: Literal["scheduler.workload.reallocated.v1"] = "scheduler.workload.reallocated.v1"
    placement_id: str = Field(description="The placement whose devices changed.")
    node: str = Field(description="Its node (unchanged).")
    allocations: list[AllocationItem] = Field(description="Everything it holds now.")
    previous: list[AllocationItem] = Field(description="What it held before.")
    reason: str = Field(default="", description="Why, for people.")


EVENTS: tuple[type[Event], ...] = (
    WorkloadSubmittedV1,
    WorkloadQueuedV1,
    WorkloadPlacedV1,
    WorkloadRunningV1,
    WorkloadEndedV1,
    WorkloadPreemptionScheduledV1,
    WorkloadMigratingV1,
    WorkloadReallocatedV1,
)
