"""Workloads, the resources they ask for and their lifecycle: pure data and rules."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from services.scheduler.domain.errors import InvalidTransition
from services.scheduler.domain.run import RunRequest

__all__ = [
    "TERMINAL_STATES",
    "TRANSITIONS",
    "GangPolicy",
    "GpuRequest",
    "MigRequest",
    "ResourceRequest",
    "UnitsRequest",
    "Workload",
    "WorkloadKind",
    "WorkloadState",
    "can_transition",
    "transition",
]

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class WorkloadKind(StrEnum):
    """An instance runs until stopped; a job finishes on its own."""

    INSTANCE = "instance"
    JOB = "job"


class WorkloadState(StrEnum):
    """Where a workload is in its lifecycle."""

    SUBMITTED = "submitted"
    QUEUED = "queued"
    PLACED = "placed"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    PREEMPTED = "preempted"
    MIGRATING = "migrating"


class GangPolicy(StrEnum):
    """How the GPUs of a multi-GPU workload may be spread."""

    SAME_NODE = "same_node"  # all on one node: NVLink/PCIe locality matters for most training
    ALL_OR_NOTHING = "all_or_nothing"  # any nodes, but every GPU at once or none


class GpuRequest(BaseModel):
    """Whole GPUs of one model, optionally with a minimum memory size."""

    model_config = _FROZEN
    kind: Literal["gpu"] = "gpu"
    model: str = Field(min_length=1, description="GPU model name, e.g. A100")
    count: int = Field(ge=1, le=64, description="number of whole GPUs")
    min_memory_gb: int | None = Field(default=None, ge=1, description="smallest acceptable GPU memory")


class MigRequest(BaseModel):
    """One MIG instance of a profile, optionally on one GPU model."""

    model_config = _FROZEN
    kind: Literal["mig"] = "mig"
    profile: str = Field(pattern=r"^\d+g\.\d+gb$", description="MIG profile, e.g. 1g.10gb")
    model: str | None = Field(default=None, description="restrict to this GPU model")


class UnitsRequest(BaseModel):
    """A number of compute units; the scheduler picks the GPU model, MIG profile or share."""

    model_config = _FROZEN
    kind: Literal["units"] = "units"
    units: float = Field(gt=0, le=1024, description="compute units (1 unit = 1/8 of an A100)")


ResourceRequest = Annotated[GpuRequest | MigRequest | UnitsRequest, Field(discriminator="kind")]


class Workload(BaseModel):
    """A tenant's instance or job as the scheduler sees it."""

    model_config = _FROZEN
    id: str = Field(min_length=1)
    tenant: str = Field(min_length=1)
    kind: WorkloadKind
    image: str = Field(min_length=1, description="catalog reference name:version")
    resources: ResourceRequest
    urgency: float = Field(ge=0.0, le=1.0)
    submitted_at: datetime
    tags: Mapping[str, str] = Field(default_factory=dict)
    preemptible: bool = False
    time_limit: timedelta | None = Field(default=None, description="also the run-time estimate for backfill")
    gang: GangPolicy = GangPolicy.SAME_NODE
    constraints: Mapping[str, str] = Field(default_factory=dict, description="GPU labels that must match")
    state: WorkloadState = WorkloadState.SUBMITTED
    run: RunRequest | None = Field(default=None, description="what runs; None for a workload stored without")


_S = WorkloadState
TERMINAL_STATES: frozenset[WorkloadState] = frozenset({_S.COMPLETED, _S.FAILED, _S.CANCELLED})
# Placed -> queued covers a placement the host refused; preempted -> queued is the requeue;
# migrating -> placed/queued is recovery re-placing work away from a failed GPU.
TRANSITIONS: Mapping[WorkloadState, frozenset[WorkloadState]] = {
    _S.SUBMITTED: frozenset({_S.QUEUED, _S.FAILED, _S.CANCELLED}),
    _S.QUEUED: frozenset({_S.PLACED, _S.CANCELLED, _S.FAILED}),
    _S.PLACED: frozenset({_S.RUNNING, _S.QUEUED, _S.PREEMPTED, _S.MIGRATING, _S.FAILED, _S.CANCELLED}),
    _S.RUNNING: frozenset({_S.COMPLETED, _S.FAILED, _S.CANCELLED, _S.PREEMPTED, _S.MIGRATING}),
    _S.PREEMPTED: frozenset({_S.QUEUED, _S.CANCELLED, _S.FAILED}),
    _S.MIGRATING: frozenset({_S.PLACED, _S.QUEUED, _S.FAILED, _S.CANCELLED}),
    _S.COMPLETED: frozenset(),
    _S.FAILED: frozenset(),
    _S.CANCELLED: frozenset(),
}


def can_transition(*, source: WorkloadState, target: WorkloadState) -> bool:
    """Whether the lifecycle allows moving from `source` to `target`."""
    return target in TRANSITIONS[source]


def transition(workload: Workload, *, target: WorkloadState) -> Workload:
    """Return the workload in state `target`, or raise InvalidTransition."""
    if not can_transition(source=workload.state, target=target):
        raise InvalidTransition(workload_id=workload.id, source=workload.state, target=target)
    return workload.model_copy(update={"state": target})
