"""The agent's book of placements on its GPUs: scheduler events in, runner calls and reports out.

Pure apart from the runner it drives (no IO, time passed in). Applying the same event twice changes
nothing, which is what lets the agent rebuild its state by replaying the scheduler topic at start.
"""

from __future__ import annotations

import logging
from collections.abc import Set
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from libs.common.events import Event
from libs.common.events.agent import MigrationStepV1, WorkloadExitedV1, WorkloadStartedV1
from libs.common.events.scheduler import (
    WorkloadEndedV1,
    WorkloadMigratingV1,
    WorkloadPlacedV1,
    WorkloadReallocatedV1,
)
from services.telemetry.service.agent.reports import Allocation
from services.telemetry.service.agent.runner import (
    MovesCheckpoints,
    RunnerReport,
    StopReason,
    WorkloadRunner,
)

__all__ = ["Placement", "PlacementBook"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Placement:
    """A workload placed on this agent's GPUs."""

    workload_id: str
    tenant_id: str
    placement_id: str
    node: str
    gpus: tuple[str, ...]
    checkpoints: bool = False  # its run spec asks for a checkpoint when it is moved


class PlacementBook:
    """Which workload holds which of this agent's GPUs, and what to report about them."""

    def __init__(self, *, runner: WorkloadRunner, gpus: Set[str]) -> None:
        self._runner = runner
        self._gpus = gpus
        self._placements: dict[str, Placement] = {}
        self._migrating_to: dict[str, str] = {}  # workload id -> placement id it moves to
        self._migrating_from: dict[str, str] = {}  # workload id -> placement id it moves from
        # Left for a move, with the runner's checkpoint and transfer reports about it still to come.
        self._leaving: dict[str, Placement] = {}
        # Ended by the scheduler (cancel, preemption) with the host's exit still to be told by the runner:
        # workload id -> placement id -> placement. By placement, for a workload placed again here and
        # ended again before the first run's exit was told has two exits to come.
        self._stopping: dict[str, dict[str, Placement]] = {}

    def allocations(self) -> dict[str, Allocation]:
        """GPU uuid -> (workload id, tenant id), to label samples."""
        return {g: (p.workload_id, p.tenant_id) for p in self._placements.values() for g in p.gpus}

    def holders(self, gpu_uuid: str) -> frozenset[str]:
        """The workloads that may still run on a GPU: placed there, ended with their exit still to be
        told, or moved away with the runner's last report of the move still to come."""
        stopping = (p for stops in self._stopping.values() for p in stops.values())
        placements = (*self._placements.values(), *stopping, *self._leaving.values())
        return frozenset(p.workload_id for p in placements if gpu_uuid in p.gpus)

    def holding(self, gpu_uuid: str) -> bool:
        """Whether any workload may still run on a GPU (see holders): no device action may touch it."""
        return bool(self.holders(gpu_uuid))

    def get(self, workload_id: str) -> Placement | None:
        """A workload's current placement on this agent, if any."""
        return self._placements.get(workload_id)

    def holds(self, workload_id: str) -> bool:
        """Whether anything of this workload is left in the book: a placement or a pending migration.

        A workload not held is exactly as if none of its events had been applied, which is what lets
        the agent's checkpoint keep the events of held workloads only (see adapters/agent/checkpoint.py).
        """
        return (
            workload_id in self._placements
            or workload_id in self._migrating_to
            or workload_id in self._stopping
        )

    def apply(self, event: Event, *, at: datetime) -> None:
        """Apply one scheduler event (others are ignored)."""
        if isinstance(event, WorkloadPlacedV1):
            self._placed(event, at=at)
        elif isinstance(event, WorkloadMigratingV1):
            current = self._placements.get(event.workload_id)
            if current is None or current.placement_id != event.to_placement_id:  # not a redelivered move
                self._migrating_to[event.workload_id] = event.to_placement_id
                self._migrating_from[event.workload_id] = event.from_placement_id
        elif isinstance(event, WorkloadEndedV1):
            self._ended(event)
        elif isinstance(event, WorkloadReallocatedV1):
            self._reallocated(event)

    def _reallocated(self, event: WorkloadReallocatedV1) -> None:
        """The placement holds the devices its host gave it: its samples follow them (the run is already
        on them, so the runner is not told)."""
        current = self._placements.get(event.workload_id)
        if current is None or current.placement_id != event.placement_id:
            return  # an older placement, or not ours
        current.gpus = tuple(a.gpu_uuid for a in event.allocations if a.gpu_uuid in self._gpus)

    def _placed(self, event: WorkloadPlacedV1, *, at: datetime) -> None:
        gpus = tuple(a.gpu_uuid for a in event.allocations if a.gpu_uuid in self._gpus)
        current = self._placements.get(event.workload_id)
        moving = self._migrating_to.get(event.workload_id) == event.placement_id
        source = self._migrating_from.get(event.workload_id) if moving else None
        if current is not None and current.placement_id == event.placement_id:
            if moving:  # a redelivered move to where it already is: nothing is pending any more
                del self._migrating_to[event.workload_id]
                self._migrating_from.pop(event.workload_id, None)
            return
        if moving or (gpus and current is not None):
            # The scheduler emits the target's placed event right after the migrating one: once it is
            # here (on these GPUs or elsewhere) nothing is pending, so other nodes' moves leave no trace.
            self._migrating_to.pop(event.workload_id, None)
            self._migrating_from.pop(event.workload_id, None)
        if not gpus:
            return
        asks = event.run is not None and event.run.checkpoint is not None
        new = Placement(event.workload_id, event.tenant_id, event.placement_id, event.node, gpus, asks)
        mine = [a for a in event.allocations if a.gpu_uuid in self._gpus]
        if current is not None:
            self._left(current)
        if current is not None and moving:
            ended = self._runner.migrate(
                workload_id=event.workload_id,
                placement_id=event.placement_id,
                target_gpu_uuids=gpus,
                allocations=mine,
                at=at,
            )
            if ended:
                self._ended_first(current)
        else:
            if current is not None and self._runner.stop(workload_id=event.workload_id, reason="moved"):
                self._ended_first(current)
            elif source is not None and isinstance(self._runner, MovesCheckpoints):
                self._runner.expect_move(
                    workload_id=event.workload_id, placement_id=event.placement_id, from_placement_id=source
                )
            self._runner.start(
                workload_id=event.workload_id,
                tenant_id=event.tenant_id,
                placement_id=event.placement_id,
                gpu_uuids=gpus,
                allocations=mine,
                profile=event.profile,
                duration_s=event.duration_s,
                run=event.run,
                at=at,
                kind=event.kind,
            )
        self._placements[event.workload_id] = new

    def _ended(self, event: WorkloadEndedV1) -> None:
        current = self._placements.get(event.workload_id)
        if current is None or current.placement_id != event.placement_id:
            return  # an older placement (e.g. the source of a migration) or not ours
        if self._runner.stop(workload_id=event.workload_id, reason=_STOPS.get(event.outcome, "cancelled")):
            self._stopping.setdefault(event.workload_id, {})[current.placement_id] = current
        elif event.outcome == "migrated":
            self._left(current)
        del self._placements[event.workload_id]

    def _ended_first(self, placement: Placement) -> None:
        """A placement being left that had ended by itself: its exit is still told, for it (the
        scheduler ends the move from that), and no checkpoint of it comes."""
        self._stopping.setdefault(placement.workload_id, {})[placement.placement_id] = placement
        self._leaving.pop(placement.workload_id, None)

    def _left(self, placement: Placement) -> None:
        """A placement left for a move: its checkpoint's progress is still to be told, where it has one."""
        if placement.checkpoints and isinstance(self._runner, MovesCheckpoints):
            self._leaving[placement.workload_id] = placement

    def reports(self, *, now: datetime) -> list[Event]:
        """Advance the runner to `now`; the agent events its reports become."""
        return self.told(self._runner.poll(now=now))

    def told(self, reports: list[RunnerReport]) -> list[Event]:
        """The agent events these runner reports become (the agent's quick poll brings its own)."""
        return [e for r in reports if (e := self._report(r)) is not None]

    def _placement_of(self, report: RunnerReport) -> Placement | None:
        """The placement a report is about: the current one, one stopped with its exit to come, or one
        left for a move with its checkpoint's progress to come (until the runner's last report of it)."""
        p = self._placements.get(report.workload_id)
        if p is not None and report.placement_id in (None, p.placement_id):
            return p
        stops = self._stopping.get(report.workload_id, {})
        if report.placement_id is None and stops:
            return next(iter(stops.values()))
        if report.placement_id is not None and report.placement_id in stops:
            return stops[report.placement_id]
        left = self._leaving.get(report.workload_id)
        if left is None or report.placement_id != left.placement_id:
            return None
        if report.last:
            del self._leaving[report.workload_id]
        return left

    def _report(self, report: RunnerReport) -> Event | None:
        p = self._placement_of(report)
        if p is None:
            return None
        wl, tenant, placement = p.workload_id, p.tenant_id, p.placement_id
        stopped = self._stopping.get(wl, {}).get(placement) is p
        # Each report carries the instant the runner saw it happen (not this tick's): charges follow it.
        if report.event == "started":
            if stopped:
                return None  # ended by the scheduler before it was seen running
            if report.reason:
                log.info("workload %s started on %s: %s", wl, placement, report.reason)
            return WorkloadStartedV1(
                workload_id=wl,
                tenant_id=tenant,
                placement_id=placement,
                node=p.node,
                at=report.at,
                pid=report.pid,
                container_id=report.container_id,
                runner=report.runner,
                notes=list(report.notes),
                gpu_uuids=None if report.gpu_uuids is None else list(report.gpu_uuids),
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
                bytes_done=report.bytes_done,
                bytes_total=report.bytes_total,
                restored=report.restored,
                note=report.reason,
            )
        # both, should a redelivered placed be in one
        if (held := self._placements.get(wl)) is not None and held.placement_id == placement:
            del self._placements[wl]
        stops = self._stopping.get(wl)
        if stops is not None and stops.pop(placement, None) is not None and not stops:
            del self._stopping[wl]
        return WorkloadExitedV1(
            workload_id=wl,
            tenant_id=tenant,
            placement_id=placement,
            node=p.node,
            outcome="completed" if report.event == "finished" else "failed",
            reason=report.reason,
            at=report.at,
            exit_reason=report.exit_reason,
            exit_code=report.exit_code,
            signal=report.signal,
        )


#: How the scheduler's end of a placement is told to the runner (a stop's exit reason).
_STOPS: dict[str, StopReason] = {"preempted": "preempted", "reclaimed": "preempted", "migrated": "moved"}


_PHASES: dict[str, Literal["checkpoint", "transfer", "restore", "running"]] = {
    "checkpoint": "checkpoint",
    "transfer": "transfer",
    "restore": "restore",
}
