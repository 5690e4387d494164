"""What the scheduler's stores answer: workloads, placements, runs, GPUs, drafts and policy as kept.

Plain frozen records with the stored columns as typed attributes; the adapters build them from their rows
(``StoredWorkload(*row)`` where a statement selects the fields in order), so nothing above the adapters
sees the driver's row type or indexes a row by a string.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from decimal import Decimal
from typing import Any

__all__ = [
    "ArrayContext",
    "CompletedRun",
    "FairShareInputs",
    "PolicySnapshot",
    "RunEnd",
    "RunExit",
    "RunHost",
    "RunStart",
    "StoredArray",
    "StoredDraft",
    "StoredGpu",
    "StoredPlacement",
    "StoredQuota",
    "StoredWorkload",
    "SubmitContext",
    "Unreleased",
    "WaitingWorkload",
    "columns_of",
]


def columns_of(record: type[Any], *, prefix: str = "") -> str:
    """The record's fields as a select list, in order (so ``record(*row)`` builds it)."""
    return ", ".join(f"{prefix}{f.name}" for f in fields(record))


@dataclass(frozen=True, slots=True)
class StoredWorkload:
    """A workload row: its request, where it is in its life, and what the queue last said about it."""

    workload_id: str
    tenant_id: str
    kind: str
    state: str
    spec: dict[str, Any]
    urgency: float
    preemptible: bool
    tags: dict[str, str]
    submitted_at: datetime
    priority: float
    #: Kept from before a migration: the pass uses it instead of recomputing.
    pinned_priority: float | None
    avoid_gpus: list[str]
    wait_reason: str | None
    position: int | None
    estimated_start: datetime | None
    placement_id: str | None
    ended_at: datetime | None
    outcome: str | None
    reason: str
    traceparent: str | None
    #: What runs (RunRequest's fields, the image resolved at submission); None for a row from before.
    run_spec: dict[str, Any] | None = None
    #: The host's facts about the current placement's run: set when it starts, cleared when re-placed.
    host_pid: int | None = None
    host_container_id: str | None = None
    host_runner: str | None = None
    #: What the host says people should know of that start (memory not isolated, restarted, limits).
    host_notes: list[str] | None = None
    #: How the current placement's run exited, from the host (also after a cancel ended the workload).
    exit_reason: str | None = None
    exit_code: int | None = None
    exit_signal: int | None = None
    #: The job array it was submitted in, and its index there; None for a workload submitted alone.
    array_id: str | None = None
    array_index: int | None = None


@dataclass(frozen=True, slots=True)
class WaitingWorkload:
    """What a schedule pass reads of each waiting workload on every pass: a ``StoredWorkload`` without its
    request (spec, run, tags), which cannot change while it waits and is read once, as ``StoredWorkload``."""

    workload_id: str
    tenant_id: str
    state: str
    urgency: float
    submitted_at: datetime
    priority: float
    pinned_priority: float | None
    avoid_gpus: list[str]
    wait_reason: str | None
    position: int | None
    estimated_start: datetime | None
    traceparent: str | None

    @classmethod
    def of(cls, stored: StoredWorkload) -> WaitingWorkload:
        """What a full row says of the same fields."""
        return cls(*(getattr(stored, f.name) for f in fields(cls)))


@dataclass(frozen=True, slots=True)
class StoredPlacement:
    """A placement row: the grants it holds and how its life went."""

    placement_id: str
    workload_id: str
    tenant_id: str
    node: str
    grants: list[dict[str, Any]]
    gpus: int
    units_milli: int
    models: list[str]
    priority: float
    preemptible: bool
    ends_at: datetime | None
    preempt_deadline: datetime | None
    preempted_for: str | None
    migrating: bool
    placed_at: datetime
    started_at: datetime | None
    ended_at: datetime | None
    outcome: str | None
    quota_released: bool


@dataclass(frozen=True, slots=True)
class CompletedRun:
    """A completed placement that ran, with its workload's request (what advice learns from)."""

    spec: dict[str, Any]
    models: list[str]
    gpus: int
    started_at: datetime
    ended_at: datetime


@dataclass(frozen=True, slots=True)
class Unreleased:
    """An ended placement whose quota Redis still counts."""

    placement_id: str
    tenant_id: str


@dataclass(frozen=True, slots=True)
class RunStart:
    """The agent's start applied: whose workload it is and its trace."""

    tenant_id: str
    traceparent: str | None


@dataclass(frozen=True, slots=True)
class RunHost:
    """What the host says of a run it started: its process or container, the runner and its notes."""

    pid: int | None = None
    container_id: str | None = None
    runner: str | None = None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RunExit:
    """What the host says of a run that exited: why, its exit status, the signal that ended it."""

    reason: str | None = None
    code: int | None = None
    signal: int | None = None

    def known(self) -> bool:
        """Whether the host said anything (an agent before these facts says nothing)."""
        return not (self.reason is None and self.code is None and self.signal is None)


@dataclass(frozen=True, slots=True)
class RunEnd:
    """The agent's exit applied: the placement's times and size, and the tenant's usage before it."""

    tenant_id: str
    traceparent: str | None
    started_at: datetime | None
    placed_at: datetime
    units_milli: int
    #: The tenant's decayed usage row (locked); both None when the tenant has none yet.
    decayed_unit_hours: float | None
    as_of: datetime | None


@dataclass(frozen=True, slots=True)
class StoredGpu:
    """A GPU as inventory last described it."""

    gpu_uuid: str
    node: str
    model: str
    memory_bytes: int
    units: Decimal
    health: str
    labels: dict[str, str]
    mig_enabled: bool
    time_slice_ratio: int
    partitions: list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class StoredQuota:
    """A tenant's limits (None = unlimited)."""

    tenant_id: str
    gpus: int | None
    units_milli: int | None
    workloads: int | None


@dataclass(frozen=True, slots=True)
class FairShareInputs:
    """Every tenant's decayed usage and shares, the tenants known, and the healthy capacity."""

    capacity: Decimal
    usage: tuple[tuple[str, float, datetime], ...]
    shares: tuple[tuple[str, float], ...]
    tenant_ids: frozenset[str]


@dataclass(frozen=True, slots=True)
class PolicySnapshot:
    """What a pass reads of policy in one snapshot: the fleet version, fair share and every quota."""

    version: int
    fair_share: FairShareInputs
    quotas: tuple[StoredQuota, ...]


@dataclass(frozen=True, slots=True)
class SubmitContext:
    """What a submission decides on, in one snapshot: fair share, the quota, the budget stop, the queue."""

    fair_share: FairShareInputs
    #: None when the tenant has no quota row (unlimited).
    quota: StoredQuota | None
    #: Why new work is refused for the project this month, if it is.
    stop: str | None
    waiting: int


@dataclass(frozen=True, slots=True)
class StoredArray:
    """A job array's answer as kept: its workloads in item order, each one's priority and queue position."""

    array_id: str
    tenant_id: str
    client_key: str | None
    body_sha256: str
    workload_ids: list[str]
    priorities: list[float]
    #: The queue position the first item was given; item i was given ``first_position + i``.
    first_position: int
    submitted_at: datetime


@dataclass(frozen=True, slots=True)
class ArrayContext:
    """What an array submission decides on, in one snapshot: as SubmitContext, with every project's stop
    and the array already kept under the request's key (if any)."""

    fair_share: FairShareInputs
    quota: StoredQuota | None
    #: Why new work is refused, by project, for the projects of the array's items that are stopped.
    stops: dict[str, str]
    waiting: int
    existing: StoredArray | None


@dataclass(frozen=True, slots=True)
class StoredDraft:
    """A creation draft: its body so far, and the workload once submitted."""

    draft_id: str
    tenant_id: str
    body: dict[str, Any]
    workload_id: str | None
