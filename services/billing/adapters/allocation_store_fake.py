"""An in-memory twin of AllocationStore's idle-reclaim part for unit tests: no database."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from services.billing.domain.idle import IdleState

__all__ = ["FakeAllocationStore", "IdleActionRecord"]


@dataclass(frozen=True, slots=True)
class IdleActionRecord:
    """One warning or release request, as the idle_actions table keeps it."""

    workload_id: str
    tenant_id: str
    stage: str
    idle_hours: float
    at: datetime


class FakeAllocationStore:
    """Open workloads (``open``), idle states and idle actions, as AllocationStore answers them."""

    def __init__(self) -> None:
        self._open: dict[str, tuple[str, str]] = {}
        self.idle: dict[str, IdleState] = {}
        self.actions: list[IdleActionRecord] = []

    def open(self, workload_id: str, *, tenant_id: str, kind: str) -> None:
        """Give a workload an open allocation (what a placement does)."""
        self._open[workload_id] = (tenant_id, kind)

    async def open_workload(self, workload_id: str) -> tuple[str, str] | None:
        """(tenant, kind) of a workload with an open allocation."""
        return self._open.get(workload_id)

    async def idle_state(self, workload_id: str) -> IdleState:
        """What the idle detector remembers about a workload."""
        return self.idle.get(workload_id, IdleState())

    async def save_idle(self, *, workload_id: str, tenant_id: str, state: IdleState) -> None:
        """Store the idle detector's state for a workload."""
        self.idle[workload_id] = state

    async def record_idle_action(
        self, *, workload_id: str, tenant_id: str, stage: str, idle_hours: float, at: datetime
    ) -> None:
        """Keep a record of a warning or release request (once per workload, stage and time)."""
        if not any((r.workload_id, r.stage, r.at) == (workload_id, stage, at) for r in self.actions):
            self.actions.append(IdleActionRecord(workload_id, tenant_id, stage, idle_hours, at))
