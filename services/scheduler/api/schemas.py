"""Request and response bodies of the scheduler's HTTP API."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from libs.common.events.agent import ExitReason
from services.scheduler.domain.arrays import MAX_ARRAY_ITEMS
from services.scheduler.domain.creation import (
    CreationDraft,
    CreationOptions,
    CreationSpec,
    ImageStep,
    NetworkStep,
)
from services.scheduler.domain.model import ResourceRequest
from services.scheduler.domain.stored import StoredArray, StoredWorkload

__all__ = [
    "DESCRIBE_MAX_CHARS",
    "DRAFT_STEP_DOC",
    "ArrayItemOut",
    "DescribeIn",
    "DescribeOut",
    "DraftIn",
    "DraftOut",
    "DraftStepIn",
    "ExitOut",
    "HostOut",
    "PriorityOut",
    "QueueEntryOut",
    "QueuePreviewOut",
    "QuotaIn",
    "QuotaOut",
    "ReadingOut",
    "RunOut",
    "ShareIn",
    "ShareOut",
    "WorkloadArrayIn",
    "WorkloadArrayOut",
    "WorkloadOut",
]


class RunOut(BaseModel):
    """What the workload runs, as placed: the image resolved from the catalog, argv, env and limits."""

    image: str | None = Field(description="OCI image reference the catalog's name:version resolved to.")
    command: list[str]
    args: list[str]
    env: dict[str, str]
    working_dir: str | None
    cpu_millis: int | None = Field(description="CPU limit in millicores (1000 = one core).")
    memory_bytes: int | None = Field(description="Host memory limit.")
    time_limit_s: float | None
    grace_s: float = Field(description="SIGTERM to SIGKILL wait on cancel or preemption.")
    checkpoint: dict[str, Any] | None = Field(
        default=None,
        description="How it checkpoints when migrated (signal or command, timeout_s); null: it is not asked.",
    )


class HostOut(BaseModel):
    """The host's facts about the current placement's run, once it started."""

    pid: int | None = Field(description="Process id on the host (process runner).")
    container_id: str | None = Field(description="Container id (container runner).")
    runner: str | None = Field(description="simulated, process or podman.")
    notes: list[str] = Field(
        default_factory=list,
        description="What the host says of this start, one line each: e.g. 'memory not isolated' (a "
        "time-sliced share without MPS), 'restarted from the start' (a migration), the limits enforced.",
    )


class ExitOut(BaseModel):
    """How the current placement's run exited, as the host reported it."""

    reason: ExitReason | None = Field(
        description="succeeded, failed, oom_killed, time_limit, cancelled or preempted."
    )
    code: int | None = Field(description="The process's exit status, if it exited.")
    signal: int | None = Field(description="The signal that ended it, if one did.")


class WorkloadOut(BaseModel):
    """A workload as its tenant sees it."""

    workload_id: str
    tenant_id: str
    kind: str
    state: str
    spec: dict[str, Any] = Field(description="The validated creation request.")
    urgency: float
    preemptible: bool
    tags: dict[str, str]
    priority: float
    position: int | None = Field(description="Place in the queue while waiting.")
    wait_reason: str | None = Field(description="Why it still waits: capacity, quota, reserved_pool...")
    estimated_start: datetime | None
    placement_id: str | None
    submitted_at: datetime
    ended_at: datetime | None
    outcome: str | None
    reason: str
    run: RunOut | None = Field(default=None, description="What runs; null for a workload from before.")
    host: HostOut | None = Field(default=None, description="Its process or container once running.")
    exit: ExitOut | None = Field(default=None, description="How its run exited, once the host said.")
    array_id: str | None = Field(default=None, description="The job array it came from, if any.")
    array_index: int | None = Field(default=None, description="Its item's index in that array.")

    @classmethod
    def of(cls, stored: StoredWorkload) -> WorkloadOut:
        """From a stored workload."""
        update = {"run": _run_out(stored), "host": _host_out(stored), "exit": _exit_out(stored)}
        return cls.model_validate(stored, from_attributes=True).model_copy(update=update)


def _run_out(s: StoredWorkload) -> RunOut | None:
    return None if s.run_spec is None else RunOut.model_validate(s.run_spec)


def _host_out(s: StoredWorkload) -> HostOut | None:
    if (s.host_pid, s.host_container_id, s.host_runner) == (None, None, None) and not s.host_notes:
        return None
    return HostOut(
        pid=s.host_pid, container_id=s.host_container_id, runner=s.host_runner, notes=s.host_notes or []
    )


def _exit_out(s: StoredWorkload) -> ExitOut | None:
    if (s.exit_reason, s.exit_code, s.exit_signal) == (None, None, None):
        return None
    return ExitOut.model_validate({"reason": s.exit_reason, "code": s.exit_code, "signal": s.exit_signal})


class QueueEntryOut(BaseModel):
    """One waiting workload in queue order."""

    position: int | None
    workload_id: str
    tenant_id: str
    priority: float
    wait_reason: str | None
    estimated_start: datetime | None
    submitted_at: datetime


class PriorityOut(BaseModel):
    """Each term of a workload's priority, like Slurm's sprio."""

    workload_id: str
    formula: str = "priority = min(0.6 * urgency + 0.4 * (1 - fair_share), 1.0)"
    urgency: float
    urgency_term: float = Field(description="0.6 * urgency")
    decayed_usage_unit_hours: float
    entitlement_unit_hours: float = Field(description="shares / total_shares * capacity * half_life / ln 2")
    shares: float
    total_shares: float
    fair_share: float = Field(description="decayed usage / entitlement, clamped to [0, 1]")
    fair_share_term: float = Field(description="0.4 * (1 - fair_share)")
    raw: float = Field(description="Sum of the terms before clamping.")
    priority: float
    pinned: bool = Field(description="True while a migration keeps the priority it was placed with.")
    explanation: str


class ShareIn(BaseModel):
    """A tenant's fair-share weight."""

    model_config = ConfigDict(extra="forbid")
    shares: float = Field(gt=0, le=1_000_000, description="Relative entitlement; default 1.")


class ShareOut(BaseModel):
    """A tenant's shares and what they entitle it to now."""

    tenant_id: str
    shares: float
    total_shares: float
    share_fraction: float
    decayed_usage_unit_hours: float
    entitlement_unit_hours: float
    fair_share: float


class QuotaIn(BaseModel):
    """Per-tenant limits; null means unlimited."""

    model_config = ConfigDict(extra="forbid")
    gpus: int | None = Field(default=None, ge=0, le=100_000, description="Whole GPUs held at once.")
    units: float | None = Field(default=None, ge=0, le=10_000_000, description="Compute units held at once.")
    workloads: int | None = Field(
        default=None, ge=0, le=1_000_000, description="Concurrent placed/running workloads."
    )


class QuotaOut(BaseModel):
    """A tenant's limits and live usage (from Redis)."""

    tenant_id: str
    limits: QuotaIn
    usage: dict[str, float]


class DraftIn(BaseModel):
    """Opens a draft: the request's options now (validated as a submission would be), its steps later."""

    model_config = ConfigDict(extra="forbid")
    options: CreationOptions = Field(
        default_factory=CreationOptions, description="kind, urgency, tags, preemptible, time_limit_s, ..."
    )


#: The body of a draft step, as documented (the route validates it against the step's own model).
DraftStepIn = ImageStep | ResourceRequest | NetworkStep
DRAFT_STEP_DOC = (
    "The step's model: image takes an ImageStep, resources a GPU, MIG or units request (by its kind), "
    "network a NetworkStep."
)


class DraftOut(BaseModel):
    """A creation draft: steps filled so far and what is missing."""

    draft_id: str
    tenant_id: str
    steps: dict[str, Any]
    missing: list[str]
    workload_id: str | None

    @classmethod
    def of(cls, draft_id: str, *, tenant: str, draft: CreationDraft, workload_id: str | None) -> DraftOut:
        """The answer for a stored draft: its steps as JSON and the steps still empty."""
        steps = draft.model_dump(mode="json")
        missing = [s for s in ("image", "resources", "network") if steps[s] is None]
        return cls(draft_id=draft_id, tenant_id=tenant, steps=steps, missing=missing, workload_id=workload_id)


DESCRIBE_MAX_CHARS = 2000


class DescribeIn(BaseModel):
    """What a person needs, in their own words (English or Chinese)."""

    model_config = ConfigDict(extra="forbid")
    text: Annotated[
        str, StringConstraints(strip_whitespace=True, min_length=1, max_length=DESCRIBE_MAX_CHARS)
    ] = Field(
        description=f"1 to {DESCRIBE_MAX_CHARS} characters, e.g. 'give me a GPU that can run BERT' or "
        "'给我分配一个能跑BERT的GPU'."
    )


class ReadingOut(BaseModel):
    """Words the reader matched and what it took them to mean."""

    phrase: str
    meaning: str


class DescribeOut(BaseModel):
    """The draft opened from a description, and how the text was read."""

    draft: DraftOut
    reading: list[ReadingOut] = Field(description="Each phrase understood, in text order, with its meaning.")
    not_understood: list[str] = Field(
        description="Words left over once understood phrases and stop words go."
    )
    notes: list[str] = Field(
        description="What was decided without a phrase of its own: defaults, empty steps."
    )


class QueuePreviewOut(BaseModel):
    """Where a request submitted now would wait, by the placer's own order."""

    position: int = Field(ge=1, description="1-based place in the whole queue.")
    ahead: int = Field(ge=0, description="Waiting workloads ordered before it.")
    same_model_ahead: int = Field(
        ge=0,
        description="Of those, the ones that could take the same GPU model (the others never hold it back).",
    )
    priority: str = Field(description="The priority class previewed: high, normal or low.")
    priority_value: float = Field(description="The priority it would get now, with this tenant's fair share.")
    explanation: str


class WorkloadArrayIn(BaseModel):
    """A job array: up to MAX_ARRAY_ITEMS creation requests, accepted together or not at all."""

    model_config = ConfigDict(extra="forbid")
    items: list[CreationSpec] = Field(
        min_length=1,
        max_length=MAX_ARRAY_ITEMS,
        description=f"1 to {MAX_ARRAY_ITEMS} bodies of POST /v1/workloads, each validated as it is there.",
    )


class ArrayItemOut(BaseModel):
    """One item of an accepted array: the workload it became, as POST /v1/workloads answers it."""

    index: int
    workload_id: str
    priority: float = Field(description="Its priority when queued.")
    position: int = Field(description="Its place in the queue when queued.")


class WorkloadArrayOut(BaseModel):
    """An accepted job array: its workloads in item order."""

    array_id: str
    tenant_id: str
    count: int
    submitted_at: datetime
    client_key: str | None = Field(description="The Idempotency-Key it was submitted under, if any.")
    items: list[ArrayItemOut]

    @staticmethod
    def body(stored: StoredArray) -> dict[str, Any]:
        """The JSON body of a stored array, built without a model per item (an array has 10,000)."""
        first = stored.first_position
        items = [
            {"index": i, "workload_id": w, "priority": p, "position": first + i}
            for i, (w, p) in enumerate(zip(stored.workload_ids, stored.priorities, strict=True))
        ]
        return {
            "array_id": stored.array_id,
            "tenant_id": stored.tenant_id,
            "count": len(items),
            "submitted_at": stored.submitted_at.isoformat(),
            "client_key": stored.client_key,
            "items": items,
        }
