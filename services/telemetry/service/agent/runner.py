"""The host side of workloads: the WorkloadRunner port and its simulated implementation.

TELEMETRY_AGENT_RUNNER picks the implementation (setup.py): the simulated runner below plays workloads
on a simulated fleet; the process runner (adapters/runner/process.py) runs the placement's command on
this host under a per-workload supervisor; the podman and Kubernetes runners run its image as a
container or a Pod. See docs/executors.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

from libs.common.events.scheduler import AllocationItem, RunSpec
from services.telemetry.adapters.runner.exits import StopReason
from services.telemetry.adapters.runner.report import RunnerReport
from services.telemetry.adapters.sim.fleet import SimFleet
from services.telemetry.adapters.sim.physics import PROFILES, ProfileKind
from services.telemetry.adapters.sim.workloads import WorkloadReport

__all__ = [
    "AwaitsHistory",
    "MovesCheckpoints",
    "RunnerReport",
    "SimWorkloadRunner",
    "StopReason",
    "WorkloadRunner",
]


class WorkloadRunner(Protocol):
    """Runs workloads on this host's GPUs and reports how they go."""

    def start(
        self,
        *,
        workload_id: str,
        tenant_id: str,
        placement_id: str,
        gpu_uuids: Sequence[str],
        allocations: Sequence[AllocationItem],
        profile: str,
        duration_s: float | None,
        run: RunSpec | None,
        at: datetime,
        kind: str = "job",
    ) -> None:
        """Start a placement on these GPUs (of its allocations, those of this agent); starting the same
        placement again changes nothing. A simulated job ends by itself after duration_s. ``kind`` is
        the workload's (job or instance): what a container runner restarts."""
        ...

    def stop(self, *, workload_id: str, reason: StopReason = "cancelled") -> bool:
        """Stop a workload; True when its exit will still be reported (with this reason), False when
        nothing more is (the simulator; a run never launched or already reported; a move)."""
        ...

    def migrate(
        self,
        *,
        workload_id: str,
        placement_id: str,
        target_gpu_uuids: Sequence[str],
        allocations: Sequence[AllocationItem],
        at: datetime,
    ) -> bool | None:
        """Move a running workload onto other GPUs of this agent, as the new placement; True when it
        had ended by itself first (its exit is still reported, for its old placement; nothing moves)."""
        ...

    def set_profile(self, *, workload_id: str, profile: str) -> bool:
        """Change how a workload uses its GPUs; False when the workload is not here."""
        ...

    def poll(self, *, now: datetime) -> list[RunnerReport]:
        """Reports since the previous poll, in order."""
        ...

    def delivered(self) -> None:
        """The reports of every poll so far reached the broker: they need not be told again."""
        ...


@runtime_checkable
class MovesCheckpoints(Protocol):
    """A runner that carries a workload's checkpoint from the placement it left to its new one."""

    def expect_move(self, *, workload_id: str, placement_id: str, from_placement_id: str) -> None:
        """The coming start of ``placement_id`` is the target of a migration from ``from_placement_id``
        (on this agent or another): it restores that placement's checkpoint where there is one."""
        ...


@runtime_checkable
class AwaitsHistory(Protocol):
    """A runner that must know every live placement before it may clean up what none claims."""

    def caught_up(self) -> None:
        """The agent applied its whole history: whatever of this runner's no start claimed is an orphan."""
        ...


def _kind(profile: str) -> ProfileKind:
    try:
        return ProfileKind(profile)
    except ValueError:
        return ProfileKind.TRAINING  # an unknown profile plays like the most common kind


class SimWorkloadRunner:
    """Plays workloads on a SimFleet: one simulated process per GPU, reported as one workload."""

    def __init__(self, *, fleet: SimFleet) -> None:
        self._fleet = fleet
        self._parts: dict[str, list[str]] = {}  # workload id -> live per-GPU part ids
        self._started: set[str] = set()
        self._kinds: dict[str, ProfileKind] = {}
        # Killed by an XID on their GPU: not failed but interrupted; recovery moves them, and the
        # migration restores them from their last checkpoint.
        self._interrupted: set[str] = set()

    def start(
        self,
        *,
        workload_id: str,
        tenant_id: str,
        placement_id: str,
        gpu_uuids: Sequence[str],
        allocations: Sequence[AllocationItem],
        profile: str,
        duration_s: float | None,
        run: RunSpec | None,
        at: datetime,
        kind: str = "job",
    ) -> None:
        parts = [f"{workload_id}#{i}" for i in range(len(gpu_uuids))]
        for part, gpu in zip(parts, gpu_uuids, strict=True):
            self._fleet.assign_workload(
                gpu_uuid=gpu, workload_id=part, kind=_kind(profile), started_at=at, duration_s=duration_s
            )
        self._parts[workload_id] = parts
        self._kinds[workload_id] = _kind(profile)

    def stop(self, *, workload_id: str, reason: StopReason = "cancelled") -> bool:
        self._release(workload_id)
        return False  # the simulator reports nothing of a stop

    def _release(self, workload_id: str) -> None:
        for part in self._parts.pop(workload_id, []):
            self._fleet.release_workload(workload_id=part)
        self._started.discard(workload_id)
        self._interrupted.discard(workload_id)

    def migrate(
        self,
        *,
        workload_id: str,
        placement_id: str,
        target_gpu_uuids: Sequence[str],
        allocations: Sequence[AllocationItem],
        at: datetime,
    ) -> None:
        if workload_id in self._interrupted:
            self._resume(workload_id, target_gpu_uuids=target_gpu_uuids, at=at)
            return
        for part, target in zip(self._parts.get(workload_id, []), target_gpu_uuids, strict=False):
            self._fleet.migrate_workload(workload_id=part, target_gpu_uuid=target, now=at)

    def _resume(self, workload_id: str, *, target_gpu_uuids: Sequence[str], at: datetime) -> None:
        self._interrupted.discard(workload_id)
        kind = self._kinds.get(workload_id, ProfileKind.TRAINING)
        parts = [f"{workload_id}#{i}" for i in range(len(target_gpu_uuids))]
        for part, gpu in zip(parts, target_gpu_uuids, strict=True):
            self._fleet.resume_workload(workload_id=part, target_gpu_uuid=gpu, kind=kind, now=at)
        self._parts[workload_id] = parts

    def set_profile(self, *, workload_id: str, profile: str) -> bool:
        parts = [self._fleet.player.get(p) for p in self._parts.get(workload_id, [])]
        kind = _kind(profile)
        for wl in parts:
            if wl is not None:
                wl.kind = kind
                total = self._fleet.gpu(wl.gpu_uuid).spec.memory_bytes
                wl.memory_bytes = int(PROFILES[kind].memory_fraction * total)
        return any(wl is not None for wl in parts)

    def delivered(self) -> None:
        return None  # nothing of the simulator's outlives the agent

    def poll(self, *, now: datetime) -> list[RunnerReport]:
        reports: list[RunnerReport] = []
        for r in self._fleet.advance(now=now):
            workload_id, _, part = r.workload_id.rpartition("#")
            if workload_id not in self._parts:
                continue
            reports.extend(self._combine(workload_id, part=part, report=r))
        return reports

    def _combine(self, workload_id: str, *, part: str, report: WorkloadReport) -> list[RunnerReport]:
        """Per-GPU parts become one workload: started once, finished when all are, failed when any is."""
        if report.event == "started":
            if workload_id in self._started:
                return []
            self._started.add(workload_id)
            return [RunnerReport(workload_id=workload_id, event="started", at=report.at)]
        if report.event == "progress":
            if part != "0":
                return []
            return [RunnerReport(workload_id, "progress", report.at, report.phase, report.progress_pct)]
        parts = self._parts[workload_id]
        parts.remove(f"{workload_id}#{part}")
        if report.event == "failed":
            self._release(workload_id)
            if (report.reason or "").startswith("XID "):
                self._interrupted.add(workload_id)
                return []
            return [RunnerReport(workload_id, "failed", report.at, reason=report.reason or "failed")]
        if parts:
            return []
        self._release(workload_id)
        return [RunnerReport(workload_id, "finished", report.at, reason=report.reason or "completed")]
