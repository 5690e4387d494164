"""Commands recovery asks other services to carry out; plain data, sent later by the handlers."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "Command",
    "DrainGpu",
    "DrainNode",
    "Escalate",
    "MigrateWorkload",
    "RebootNode",
    "ResetGpu",
    "RestartWorkload",
    "ReturnGpuToService",
    "ReturnNodeToService",
]


class _Command(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class DrainGpu(_Command):
    """Stop placing work on a GPU (inventory)."""

    kind: Literal["drain_gpu"] = "drain_gpu"
    gpu: str
    reason: str


class DrainNode(_Command):
    """Stop placing work on every GPU of a node (inventory)."""

    kind: Literal["drain_node"] = "drain_node"
    node: str
    reason: str


class MigrateWorkload(_Command):
    """Move a workload to a healthy GPU, keeping its priority (scheduler)."""

    kind: Literal["migrate_workload"] = "migrate_workload"
    workload_id: str
    away_from_gpu: str | None = Field(description="GPU to avoid; None when the whole node is drained")
    keep_priority: bool = True


class RestartWorkload(_Command):
    """Restart a workload whose own fault killed it; the GPU stays in service (scheduler)."""

    kind: Literal["restart_workload"] = "restart_workload"
    workload_id: str
    keep_priority: bool = True


class ResetGpu(_Command):
    """Reset a drained GPU, then run its health check (node agent)."""

    kind: Literal["reset_gpu"] = "reset_gpu"
    gpu: str


class RebootNode(_Command):
    """Reboot a drained node, then run its health check (node agent)."""

    kind: Literal["reboot_node"] = "reboot_node"
    node: str


class ReturnGpuToService(_Command):
    """Make a healthy GPU schedulable again (inventory)."""

    kind: Literal["return_gpu_to_service"] = "return_gpu_to_service"
    gpu: str


class ReturnNodeToService(_Command):
    """Make a healthy node's GPUs schedulable again (inventory)."""

    kind: Literal["return_node_to_service"] = "return_node_to_service"
    node: str


class Escalate(_Command):
    """Page a person: automated recovery failed, ran out of time, or cannot fix this fault."""

    kind: Literal["escalate"] = "escalate"
    reason: str


Command = Annotated[
    DrainGpu
    | DrainNode
    | MigrateWorkload
    | RestartWorkload
    | ResetGpu
    | RebootNode
    | ReturnGpuToService
    | ReturnNodeToService
    | Escalate,
    Field(discriminator="kind"),
]
