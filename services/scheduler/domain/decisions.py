"""Inputs and outputs of a scheduling pass: queue entries, configuration, and the decisions made."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

from services.scheduler.domain.backfill import Reservation
from services.scheduler.domain.cluster import Grant
from services.scheduler.domain.model import Workload
from services.scheduler.domain.preemption import PreemptionProposal
from services.scheduler.domain.reserved import ReservedPoolConfig

__all__ = [
    "Decisions",
    "Placement",
    "QueueEntry",
    "QueuePosition",
    "SchedulerConfig",
    "WaitReason",
    "order_queue",
]


class WaitReason(StrEnum):
    """Why a workload is still waiting after a pass."""

    CAPACITY = "capacity"
    RESERVED_POOL = "reserved_pool"
    QUOTA = "quota"
    NO_MATCHING_GPU = "no_matching_gpu"
    PREEMPTING = "preempting"


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """Knobs of one scheduling pass; attempts bound the pass's worst-case cost."""

    reserved: ReservedPoolConfig = field(default_factory=ReservedPoolConfig)
    preemption_grace: timedelta = timedelta(minutes=5)
    preemption_attempts: int = 8
    backfill: bool = True
    head_attempts: int = 4


@dataclass(frozen=True, slots=True)
class QueueEntry:
    """A waiting workload and its priority, computed by the caller from priority.py; a migrating one
    also names the GPUs it moves away from (they are hidden from it alone, never from the pass)."""

    workload: Workload
    priority: float
    avoid_gpus: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Placement:
    """Exact slots given to a workload in this pass."""

    workload_id: str
    tenant: str
    grants: tuple[Grant, ...]
    priority: float
    backfilled: bool = False

    @property
    def nodes(self) -> tuple[str, ...]:
        """Nodes the placement spans, in grant order."""
        return tuple(dict.fromkeys(g.node for g in self.grants))


@dataclass(frozen=True, slots=True)
class QueuePosition:
    """A workload still waiting: its place in line, why, and when it is expected to start if known."""

    workload_id: str
    position: int
    priority: float
    reason: WaitReason
    estimated_start: datetime | None = None


@dataclass(frozen=True, slots=True)
class Decisions:
    """Everything one pass decided."""

    placements: tuple[Placement, ...]
    waiting: tuple[QueuePosition, ...]
    preemptions: tuple[PreemptionProposal, ...]
    reservation: Reservation | None = None


def order_queue(entries: Iterable[QueueEntry]) -> list[QueueEntry]:
    """Highest priority first, then oldest, then by id so the order is total."""
    return sorted(entries, key=lambda e: (-e.priority, e.workload.submitted_at, e.workload.id))
