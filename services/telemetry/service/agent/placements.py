"""The agent's book of placements on its GPUs: scheduler events in, runner calls and reports out.

Pure apart from the runner it drives (no IO, time passed in). Applying the same event twice changes
nothing, which is what lets the agent rebuild its state by replaying the scheduler topic at start.
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from libs.common.events import Event
from libs.common.events.agent import MigrationStepV1, WorkloadExitedV1, WorkloadStartedV1
from libs.common.events.scheduler import WorkloadEndedV1, WorkloadMigratingV1, WorkloadPlacedV1
from services.telemetry.service.agent.reports import Allocation
from services.telemetry.service.agent.runner import RunnerReport, WorkloadRunner

__all__ = ["Placement", "PlacementBook"]


@dataclass(slots=True)
class Placement:
    """A workload placed on this agent's GPUs."""

    workload_id: str
    tenant_id: str
    placement_id: str
    node: str
    gpus: tuple[str, ...]


class PlacementBook:
    """Which workload holds which of this agent's GPUs, and what to report about them."""

    def __init__(self, *, runner: WorkloadRunner, gpus: Set[str]) -> None:
        self._runner = runner
        self._gpus = gpus
        self._placements: dict[str, Placement] = {}
        self._migrating_to: dict[str, str] = {}  # workload id -> placement id it moves to

    def allocations(self) -> dict[str, Allocation]:
        """GPU uuid -> (workload id, tenant id), to label samples."""
        return {g: (p.workload_id, p.tenant_id) for p in self._placements.values() for g in p.gpus}

    def get(self, workload_id: str) -> Placement | None:
        """A workload's current placement on this agent, if any."""
        return self._placements.get(workload_id)

    def holds(self, workload_id: str) -> bool:
        """Whether anything of this workload is left in the book: a placement or a pending migration.

        A workload not held is exactly as if none of its events had been applied, which is what lets
        the agent's checkpoint keep the events of held workloads only (see adapters/agent/checkpoint.py).
        """
        return workload_id in self._placements or workload_id in self._migrating_to

    def apply(self, event: Event, *, at: datetime) -> None:
        """Apply one scheduler event (others are ignored)."""
        if isinstance(event, WorkloadPlacedV1):
            self._placed(event, at=at)
        elif isinstance(event, WorkloadMigratingV1):
            current = self._placements.get(event.workload_id)
            if current is None or current.placement_id != event.to_placement_id:  # not a redelivered move
                self._migrating_to[event.workload_id] = event.to_placement_id
        elif isinstance(event, WorkloadEndedV1):
            self._ended(event)

    def _placed(self, event: WorkloadPlacedV1, *, at: datetime) -> None:
        gpus = tuple(a.gpu_uuid for a in event.allocations if a.gpu_uuid in self._gpus)
        current = self._placements.get(event.workload_id)
        moving = self._migrating_to.get(event.workload_id) == event.placement_id
        if current is not None and current.placement_id == event.placement_id:
            if moving:  # a redelivered move to where it already is: nothing is pending any more
                del self._migrating_to[event.workload_id]
            return
        if moving or (gpus and current is not None):
            # The scheduler emits the target's placed event right after the migrating one: once it is
            # here (on these GPUs or elsewhere) nothing is pending, so other nodes' moves leave no trace.
            self._migrating_to.pop(event.workload_id, None)
        if not gpus:
            return
        new = Placement(event.workload_id, event.tenant_id, event.placement_id, event.node, gpus)
        if current is not None and moving:
            self._runner.migrate(workload_id=event.workload_id, target_gpu_uuids=gpus, at=at)
        else:
            if current is not None:
                self._runner.stop(workload_id=event.workload_id)
            self._runner.start(
                workload_id=event.workload_id,
                gpu_uuids=gpus,
                profile=event.profile,
                duration_s=event.duration_s,
                at=at,
            )
        self._placements[event.workload_id] = new

    def _ended(self, event: WorkloadEndedV1) -> None:
        current = self._placements.get(event.workload_id)
        if current is None or current.placement_id != event.placement_id:
            return  # an older placement (e.g. the source of a migration) or not ours
        self._runner.stop(workload_id=event.workload_id)
        del self._placements[event.workload_id]

    def reports(self, *, now: datetime) -> list[Event]:
        """Advance the runner to `now`; the agent events its reports become."""
        return [e for r in self._runner.poll(now=now) if (e := self._report(r)) is not None]

    def _report(self, report: RunnerReport) -> Event | None:
        p = self._placements.get(report.workload_id)
        if p is None:
            return None
        wl, tenant, placement = p.workload_id, p.tenant_id, p.placement_id
        # Each report carries the instant the runner saw it happen (not this tick's): charges follow it.
        if report.event == "started":
            return WorkloadStartedV1(
                workload_id=wl, tenant_id=tenant, placement_id=placement, node=p.node, at=report.at
            )
        if report.event == "progress":
            return MigrationStepV1(
                workload_id=wl,
                tenant_id=tenant,
                placement_id=placement,
                node=p.node,
                phase=_PHASES.get(report.phase or "", "running"),
                percent=int(min(max(report.percent or 0.0, 0.0), 100.0)),
                at=report.at,
            )
        del self._placements[report.workload_id]
        return WorkloadExitedV1(
            workload_id=wl,
            tenant_id=tenant,
            placement_id=placement,
            node=p.node,
            outcome="completed" if report.event == "finished" else "failed",
            reason=report.reason,
            at=report.at,
        )


_PHASES: dict[str, Literal["checkpoint", "transfer", "restore", "running"]] = {
    "checkpoint": "checkpoint",
    "transfer": "transfer",
    "restore": "restore",
}
