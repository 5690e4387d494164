"""An in-memory twin of AllocationStore for unit tests: allocations, lifecycle facts, idle state."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from services.billing.adapters.allocation_store import AllocationRow
from services.billing.domain.host_facts import HostFact
from services.billing.domain.idle import IdleActionRecord, IdleState
from services.billing.domain.rating import Allocation, EndReason
from services.billing.domain.reconciliation import FactKind, PlacementFact

__all__ = ["FakeAllocationStore"]


class FakeAllocationStore:
    """Allocations (``rows``), facts, idle states (``idle``) and idle actions (``actions``), as
    AllocationStore answers them; locks are no-ops (one unit of work at a time)."""

    def __init__(self) -> None:
        self.rows: dict[str, AllocationRow] = {}
        self._facts: list[tuple[str, PlacementFact]] = []  # (event id, fact), in arrival order
        self._host_facts: list[HostFact] = []  # in arrival order
        self.idle: dict[str, IdleState] = {}
        self.actions: list[IdleActionRecord] = []

    async def open_allocation(self, *, allocation: Allocation, placement_id: str, kind: str) -> bool:
        """Insert an open allocation, held but not running; False when it already exists."""
        if allocation.allocation_id in self.rows:
            return False
        opened = replace(allocation, ended_at=None, end_reason=None)  # as the INSERT stores it
        self.rows[allocation.allocation_id] = AllocationRow(
            allocation=opened,
            placement_id=placement_id,
            kind=kind,
            rated_until=opened.started_at,
            open=True,
            running=False,
        )
        return True

    async def start_placement(self, placement_id: str, *, at: datetime) -> list[str]:
        """Start charging a placement's open allocations that do not run yet, from `at`; the ids started."""
        started = []
        for allocation_id, row in sorted(self.rows.items()):
            if row.placement_id == placement_id and row.open and not row.running:
                moved = replace(row.allocation, started_at=at)
                self.rows[allocation_id] = replace(
                    row,
                    allocation=moved,
                    rated_until=at,
                    running=True,
                    running_event_id=self._run_event(placement_id),
                )
                started.append(allocation_id)
        return started

    async def lock_placement(self, placement_id: str) -> list[AllocationRow]:
        """A placement's allocations, by id."""
        return [r for _, r in sorted(self.rows.items()) if r.placement_id == placement_id]

    async def lock_open_of_workload(self, workload_id: str) -> list[AllocationRow]:
        """Every open allocation of a workload (any placement), by id."""
        return [r for _, r in sorted(self.rows.items()) if r.open and r.allocation.workload_id == workload_id]

    async def lock_due(self, *, before: datetime, limit: int) -> list[AllocationRow]:
        """Open allocations that run, rated short of `before`, least rated first."""
        due = [r for r in self.rows.values() if r.open and r.running and r.rated_until < before]
        return sorted(due, key=lambda r: (r.rated_until, r.allocation.allocation_id))[:limit]

    async def set_rated(self, allocation_id: str, rated_until: datetime) -> None:
        """Record how far an allocation is rated."""
        if (row := self.rows.get(allocation_id)) is not None:
            self.rows[allocation_id] = replace(row, rated_until=rated_until)

    async def close(
        self, allocation: Allocation, *, rated_until: datetime, ended_event_id: str | None = None
    ) -> None:
        """Mark an allocation ended: its end, its reason, the event and how far it is rated; nothing else."""
        if (row := self.rows.get(allocation.allocation_id)) is None:
            return
        ended = replace(row.allocation, ended_at=allocation.ended_at, end_reason=allocation.end_reason)
        self.rows[allocation.allocation_id] = replace(
            row, allocation=ended, rated_until=rated_until, open=False, ended_event_id=ended_event_id
        )

    async def all_allocations(self) -> list[AllocationRow]:
        """Every allocation, by id."""
        return [r for _, r in sorted(self.rows.items())]

    async def record_fact(
        self,
        *,
        event_id: str,
        kind: str,
        placement_id: str,
        at: datetime,
        end_reason: EndReason | None = None,
    ) -> None:
        """Append a lifecycle fact, once per placement, kind and event."""
        fact = PlacementFact(kind=FactKind(kind), placement_id=placement_id, at=at, end_reason=end_reason)
        if not any(
            (e, f.placement_id, f.kind) == (event_id, placement_id, fact.kind) for e, f in self._facts
        ):
            self._facts.append((event_id, fact))

    async def first_end(self, placement_id: str) -> tuple[datetime, EndReason] | None:
        """The earliest end fact of a placement, if one arrived."""
        first = self._first_end(placement_id)
        if first is None:
            return None
        fact = first[0]
        if fact.end_reason is None:  # the real store's EndReason(NULL) refuses it too
            raise ValueError(f"the end fact of placement {placement_id} has no reason")
        return fact.at, fact.end_reason

    async def first_end_event(self, placement_id: str) -> str | None:
        """The id of the event behind the earliest end fact of a placement, if one arrived."""
        first = self._first_end(placement_id)
        return None if first is None else first[1]

    def _first_end(self, placement_id: str) -> tuple[PlacementFact, str] | None:
        ends = [(f, e) for e, f in self._facts if f.placement_id == placement_id and f.kind is FactKind.ENDED]
        return min(ends, key=lambda pair: pair[0].at, default=None)  # stable: the first kept at that instant

    async def first_running(self, placement_id: str) -> datetime | None:
        """The earliest running fact of a placement, if one arrived."""
        runs = [f.at for _, f in self._facts if f.placement_id == placement_id and f.kind is FactKind.RUNNING]
        return min(runs, default=None)

    def _run_event(self, placement_id: str) -> str | None:
        runs = [
            (f.at, e) for e, f in self._facts if f.placement_id == placement_id and f.kind is FactKind.RUNNING
        ]
        return min(runs, key=lambda pair: pair[0], default=(None, None))[1]

    async def facts(self) -> list[PlacementFact]:
        """Every lifecycle fact, in arrival order."""
        return [f for _, f in self._facts]

    async def record_host_fact(self, *, event_id: str, fact: HostFact, event_type: str | None = None) -> None:
        """Keep a node agent's report, once per placement, kind and instant."""
        if not any(
            (f.placement_id, f.kind, f.at) == (fact.placement_id, fact.kind, fact.at)
            for f in self._host_facts
        ):
            self._host_facts.append(fact)

    async def host_facts(self) -> list[HostFact]:
        """Every host fact, in arrival order."""
        return list(self._host_facts)

    async def open_workload(self, workload_id: str) -> tuple[str, str] | None:
        """(tenant, kind) of a workload with an open allocation that runs."""
        for row in self.rows.values():
            if row.open and row.running and row.allocation.workload_id == workload_id:
                return row.allocation.tenant_id, row.kind
        return None

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
