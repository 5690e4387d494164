"""What a runner tells the agent about a workload on this host (every runner returns these)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from services.telemetry.adapters.runner.exits import ExitReason

__all__ = ["RunnerReport"]


@dataclass(frozen=True, slots=True)
class RunnerReport:
    """Something that happened to a workload on this host.

    ``placement_id`` names the placement it is about where the runner knows it (the process runner);
    None means the workload's current one. The exit facts are None from the simulator.
    """

    workload_id: str
    event: Literal["started", "finished", "failed", "progress"]
    at: datetime
    phase: str | None = None
    percent: float | None = None
    reason: str = ""
    placement_id: str | None = None
    pid: int | None = None
    container_id: str | None = None
    runner: str | None = None
    exit_reason: ExitReason | None = None
    exit_code: int | None = None
    signal: int | None = None
    #: What people should know of a start: memory not isolated, restarted from the start, the limits.
    notes: tuple[str, ...] = ()
    #: A migration's progress (moves.py): the phase's bytes, whether it ran from its checkpoint (at
    #: running), and ``last``: nothing more comes about this placement, which has left the host.
    bytes_done: int | None = None
    bytes_total: int | None = None
    restored: bool | None = None
    last: bool = False
    #: At started: the devices the host actually gave it, when the runner reads them back (Kubernetes'
    #: device plugin chooses them); None: as placed.
    gpu_uuids: tuple[str, ...] | None = None
