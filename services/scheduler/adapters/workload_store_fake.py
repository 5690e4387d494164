"""An in-memory twin of WorkloadStore's unit-of-work statements for unit tests: workloads, placements, slots.

Each method does what its statement in ``workload_store/`` does to the rows (held to it by
tests/integration/scheduler/test_workload_store_contract.py). Where a unique index refuses a row (a
workload or placement id taken, a second live placement of a workload, a slot held twice) the fake raises
``UniqueViolation`` as asyncpg raises ``UniqueViolationError``; the unit of work then rolls back either way.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, TypeVar

from libs.common.db.uow import OutboxRow
from services.scheduler.adapters.fleet_store_fake import FakeFleetStore
from services.scheduler.domain.stored import (
    RunEnd,
    RunExit,
    RunHost,
    RunStart,
    StoredPlacement,
    StoredWorkload,
)

__all__ = ["FakeWorkloadStore", "UniqueViolation"]

R = TypeVar("R")
#: A tenant's decayed usage and its time, or None when the tenant has no usage row.
UsageOf = Callable[[str], "tuple[float, datetime] | None"]


class UniqueViolation(Exception):
    """A row a unique index of the real tables would refuse."""


def _jsonb(value: Any) -> Any:
    """The value as a jsonb column gives it back (a fresh copy, tuples as lists)."""
    return json.loads(json.dumps(value))


def _fresh(record: R) -> R:
    """A copy, as each real read builds a new record: a caller changing it changes nothing kept."""
    return copy.deepcopy(record)


def _usage_reader(fleet: FakeFleetStore) -> UsageOf:
    def usage_of(tenant: str) -> tuple[float, datetime] | None:
        return fleet.usage.get(tenant)

    return usage_of


class FakeWorkloadStore:
    """Keeps what WorkloadStore would write, readable as plain attributes; tenant usage is read from
    ``fleet`` (where FleetStore.set_usage writes it, as the real end_run reads tenant_usage)."""

    def __init__(self, fleet: FakeFleetStore | None = None) -> None:
        self.workloads: dict[str, StoredWorkload] = {}
        self.placements: dict[str, StoredPlacement] = {}
        #: (gpu, slot) -> the placement holding it.
        self.held: dict[tuple[str, str], str] = {}
        #: The outbox rows written with submissions, in order.
        self.outbox: list[OutboxRow] = []
        #: Wake-ups of the placer delivered (one per committed unit of work that asked), counted by
        #: FakeSchedulerUnitOfWork's commit as FakeFleetStore's are.
        self.wakes = 0
        self.wake_pending = False
        # A function, not the fleet: the unit of work's rollback deep-copies this store's attributes, and
        # the usage read must stay the fleet the unit of work holds.
        self._usage_of = _usage_reader(fleet or FakeFleetStore())

    async def submit(self, *, row: dict[str, Any], outbox: Sequence[OutboxRow]) -> StoredWorkload:
        """Insert a queued workload with its outbox rows and wake the placer."""
        wid = row["workload_id"]
        if wid in self.workloads:
            raise UniqueViolation(f"workload {wid!r} exists (workloads_pkey)")
        self.workloads[wid] = StoredWorkload(
            workload_id=wid,
            tenant_id=row["tenant_id"],
            kind=row["kind"],
            state="queued",
            spec=_jsonb(row["spec"]),
            urgency=float(row["urgency"]),
            preemptible=row["preemptible"],
            tags=_jsonb(row["tags"]),
            submitted_at=row["submitted_at"],
            priority=float(row["priority"]),
            pinned_priority=None,
            avoid_gpus=[],
            wait_reason=None,
            position=None,
            estimated_start=None,
            placement_id=None,
            ended_at=None,
            outcome=None,
            reason="",
            traceparent=row.get("traceparent"),
            run_spec=_jsonb(row.get("run_spec")),
        )
        self.outbox.extend(outbox)
        self.wake_pending = True
        return _fresh(self.workloads[wid])

    async def lock_workload(self, workload_id: str) -> StoredWorkload | None:
        """A workload (nothing to lock in memory)."""
        return _fresh(self.workloads.get(workload_id))

    async def count_waiting(self) -> int:
        """How many workloads are queued or migrating."""
        return sum(w.state in ("queued", "migrating") for w in self.workloads.values())

    async def set_state(
        self, workload_id: str, *, state: str, placement_id: str | None, priority: float | None = None
    ) -> None:
        """Move a workload to a non-terminal state, its queue facts cleared (its run's host facts too when
        the placement changes; a migration's pin and avoided GPUs when it leaves the migration)."""
        if (w := self.workloads.get(workload_id)) is not None:
            facts = {} if w.placement_id == placement_id else _NO_RUN_FACTS
            moving: dict[str, Any] = (
                {} if state == "migrating" else {"pinned_priority": None, "avoid_gpus": []}
            )
            self.workloads[workload_id] = replace(
                w,
                **facts,
                **moving,
                state=state,
                placement_id=placement_id,
                wait_reason=None,
                position=None,
                estimated_start=None,
                priority=w.priority if priority is None else float(priority),
            )

    async def end_workload(
        self, workload_id: str, *, state: str, outcome: str, reason: str, at: datetime
    ) -> None:
        """Move a workload to a terminal state (its placement id kept)."""
        if (w := self.workloads.get(workload_id)) is not None:
            self.workloads[workload_id] = _ended(w, state=state, outcome=outcome, reason=reason, at=at)

    async def start_migration(self, workload_id: str, *, priority: float, avoid_gpu: str) -> None:
        """Mark a workload migrating, its priority pinned, the GPU added to those it avoids (each once,
        sorted, as ``jsonb_agg(DISTINCT ...)`` answers them; the database's collation may order odd ids
        otherwise)."""
        if (w := self.workloads.get(workload_id)) is not None:
            avoid = sorted({*w.avoid_gpus, avoid_gpu})
            self.workloads[workload_id] = replace(
                w, state="migrating", pinned_priority=float(priority), avoid_gpus=avoid
            )

    async def insert_placement(self, *, row: dict[str, Any], slots: Sequence[tuple[str, str]]) -> None:
        """Record a placement and the slots it holds; what a unique index refuses raises UniqueViolation."""
        pid, wid = row["placement_id"], row["workload_id"]
        keys = [(gpu, slot) for gpu, slot in slots]
        if pid in self.placements:
            raise UniqueViolation(f"placement {pid!r} exists (placements_pkey)")
        if self._live_of(wid) is not None:
            raise UniqueViolation(f"workload {wid!r} has a live placement (placements_one_live)")
        if len(set(keys)) < len(keys) or any(k in self.held for k in keys):
            raise UniqueViolation(f"a slot of {keys} is held (held_slots_pkey)")
        self.placements[pid] = _placement(row)
        self.held.update(dict.fromkeys(keys, pid))

    async def placement(self, placement_id: str) -> StoredPlacement | None:
        """A placement (nothing to lock in memory)."""
        return _fresh(self.placements.get(placement_id))

    async def live_placement_of(self, workload_id: str) -> str | None:
        """The id of a workload's live placement."""
        return self._live_of(workload_id)

    async def end_placement(
        self, placement_id: str, *, outcome: str, at: datetime, released: bool = False
    ) -> StoredPlacement | None:
        """End a live placement and free its slots; None when it had already ended."""
        self._free(placement_id)
        p = self.placements.get(placement_id)
        if p is None or p.ended_at is not None:
            return None
        self.placements[placement_id] = replace(p, ended_at=at, outcome=outcome, quota_released=released)
        return _fresh(self.placements[placement_id])

    async def live_placements_on(self, node: str) -> list[StoredPlacement]:
        """The live placements of a node holding their slots (not migrating), in id order."""
        live = [p for p in self.placements.values() if p.node == node and p.ended_at is None]
        return [_fresh(p) for p in sorted(live, key=lambda p: p.placement_id) if not p.migrating]

    async def regrant(self, grants: Mapping[str, Sequence[Mapping[str, Any]]]) -> None:
        """Give each placement these grants and their slots, all freed before any is held again; a slot
        held twice raises UniqueViolation."""
        for pid in grants:
            self._free(pid)
        keys = [((g["gpu"], g["slot"]), pid) for pid, held in grants.items() for g in held]
        if len({k for k, _ in keys}) < len(keys) or any(k in self.held for k, _ in keys):
            raise UniqueViolation(f"a slot of {[k for k, _ in keys]} is held (held_slots_pkey)")
        for pid, held in grants.items():
            if (p := self.placements.get(pid)) is not None:
                self.placements[pid] = replace(p, grants=_jsonb(list(held)))
        self.held.update(dict(keys))

    async def mark_migrating(self, placement_id: str) -> None:
        """Mark a placement migrating and free its slots (it stays live until the workload is re-placed)."""
        if (p := self.placements.get(placement_id)) is not None:
            self.placements[placement_id] = replace(p, migrating=True)
        self._free(placement_id)

    async def schedule_preemption(
        self, placement_id: str, *, deadline: datetime, preempted_for: str
    ) -> StoredPlacement | None:
        """Set a live victim's deadline once; None when already set or ended."""
        p = self.placements.get(placement_id)
        if p is None or p.ended_at is not None or p.preempt_deadline is not None:
            return None
        self.placements[placement_id] = replace(p, preempt_deadline=deadline, preempted_for=preempted_for)
        return _fresh(self.placements[placement_id])

    async def start_run(
        self, workload_id: str, *, placement_id: str, at: datetime, host: RunHost | None = None
    ) -> RunStart | None:
        """Mark the current placement started (once) and the workload running with the host's process or
        container; None when the report is stale (not the workload's placement, or the workload not
        placed)."""
        h = host or RunHost()
        w = self.workloads.get(workload_id)
        if w is None or w.placement_id != placement_id or w.state != "placed":
            return None
        p = self.placements.get(placement_id)
        if p is not None and p.started_at is None:
            self.placements[placement_id] = replace(p, started_at=at)
        self.workloads[workload_id] = replace(
            w,
            state="running",
            wait_reason=None,
            position=None,
            estimated_start=None,
            host_pid=h.pid,
            host_container_id=h.container_id,
            host_runner=h.runner,
            host_notes=list(h.notes),
        )
        return RunStart(tenant_id=w.tenant_id, traceparent=w.traceparent)

    async def end_run(
        self,
        workload_id: str,
        *,
        placement_id: str,
        outcome: str,
        reason: str,
        at: datetime,
        exit_facts: RunExit | None = None,
    ) -> RunEnd | None:
        """End the current placement (placed or running) and the workload with the host's exit facts,
        free its slots, answer the tenant's usage and wake the placer; None when the report is stale or
        the placement had ended."""
        w = self.workloads.get(workload_id)
        if w is None or w.placement_id != placement_id or w.state not in ("placed", "running"):
            return None
        self._free(placement_id)  # the statement frees them whenever the workload matched
        p = self.placements.get(placement_id)
        if p is None or p.ended_at is not None:
            return None
        self.placements[placement_id] = replace(p, ended_at=at, outcome=outcome, quota_released=False)
        ended = _ended(w, state=outcome, outcome=outcome, reason=reason, at=at)
        self.workloads[workload_id] = _with_exit(ended, exit_facts or RunExit())
        self.wake_pending = True
        usage = self._usage_of(w.tenant_id)
        return RunEnd(
            tenant_id=w.tenant_id,
            traceparent=w.traceparent,
            started_at=p.started_at,
            placed_at=p.placed_at,
            units_milli=int(p.units_milli),
            decayed_unit_hours=None if usage is None else float(usage[0]),
            as_of=None if usage is None else usage[1],
        )

    async def record_exit(self, workload_id: str, *, placement_id: str, exit_facts: RunExit) -> bool:
        """Keep the host's exit facts on a workload already ended (completed, failed, cancelled) on this
        placement; False otherwise."""
        w = self.workloads.get(workload_id)
        if w is None or w.placement_id != placement_id or w.state not in _ENDED:
            return False
        self.workloads[workload_id] = _with_exit(w, exit_facts)
        return True

    async def wake_placer(self) -> None:
        """Wake the placer when the unit of work commits."""
        self.wake_pending = True

    def _live_of(self, workload_id: str) -> str | None:
        live = (p for p in self.placements.values() if p.workload_id == workload_id and p.ended_at is None)
        return next((p.placement_id for p in live), None)

    def _free(self, placement_id: str) -> None:
        self.held = {k: pid for k, pid in self.held.items() if pid != placement_id}


_ENDED = frozenset({"completed", "failed", "cancelled"})
_NO_RUN_FACTS: dict[str, Any] = dict.fromkeys(
    ("host_pid", "host_container_id", "host_runner", "host_notes", "exit_reason", "exit_code", "exit_signal")
)


def _with_exit(w: StoredWorkload, facts: RunExit) -> StoredWorkload:
    return replace(w, exit_reason=facts.reason, exit_code=facts.code, exit_signal=facts.signal)


def _ended(w: StoredWorkload, *, state: str, outcome: str, reason: str, at: datetime) -> StoredWorkload:
    return replace(
        w,
        state=state,
        outcome=outcome,
        reason=reason,
        ended_at=at,
        position=None,
        wait_reason=None,
        estimated_start=None,
    )


def _placement(row: dict[str, Any]) -> StoredPlacement:
    return StoredPlacement(
        placement_id=row["placement_id"],
        workload_id=row["workload_id"],
        tenant_id=row["tenant_id"],
        node=row["node"],
        grants=_jsonb(row["grants"]),
        gpus=int(row["gpus"]),
        units_milli=int(row["units_milli"]),
        models=_jsonb(row["models"]),
        priority=float(row["priority"]),
        preemptible=row["preemptible"],
        ends_at=row["ends_at"],
        preempt_deadline=None,
        preempted_for=None,
        migrating=False,
        placed_at=row["placed_at"],
        started_at=None,
        ended_at=None,
        outcome=None,
        quota_released=False,
    )
