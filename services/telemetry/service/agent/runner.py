"""The host side of workloads: the WorkloadRunner port and its simulated implementation.

On a real host the natural WorkloadRunner is Kubernetes: ``start`` creates a Pod requesting
``nvidia.com/gpu: N`` (or a MIG resource such as ``nvidia.com/mig-3g.40gb``) pinned to the node,
``stop`` deletes it, ``migrate`` runs the job's checkpoint hook, copies the checkpoint and starts the
Pod on the target with a restore hook, and ``poll`` turns Pod phase changes into reports. Only the
simulated runner is implemented here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

from services.telemetry.adapters.sim.fleet import SimFleet
from services.telemetry.adapters.sim.physics import PROFILES, ProfileKind
from services.telemetry.adapters.sim.workloads import WorkloadReport

__all__ = ["RunnerReport", "SimWorkloadRunner", "WorkloadRunner"]


@dataclass(frozen=True, slots=True)
class RunnerReport:
    """Something that happened to a workload on this host."""

    workload_id: str
    event: Literal["started", "finished", "failed", "progress"]
    at: datetime
    phase: str | None = None
    percent: float | None = None
    reason: str = ""


class WorkloadRunner(Protocol):
    """Runs workloads on this host's GPUs and reports how they go."""

    def start(
        self,
        *,
        workload_id: str,
        gpu_uuids: Sequence[str],
        profile: str,
        duration_s: float | None,
        at: datetime,
    ) -> None:
        """Start a workload on these GPUs (a job ends by itself after duration_s)."""
        ...

    def stop(self, *, workload_id: str) -> None:
        """Stop a workload; reports nothing (the scheduler asked for it)."""
        ...

    def migrate(self, *, workload_id: str, target_gpu_uuids: Sequence[str], at: datetime) -> None:
        """Checkpoint, transfer and restore a running workload onto other GPUs."""
        ...

    def set_profile(self, *, workload_id: str, profile: str) -> bool:
        """Change how a workload uses its GPUs; False when the workload is not here."""
        ...

    def poll(self, *, now: datetime) -> list[RunnerReport]:
        """Reports since the previous poll, in order."""
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
        gpu_uuids: Sequence[str],
        profile: str,
        duration_s: float | None,
        at: datetime,
    ) -> None:
        parts = [f"{workload_id}#{i}" for i in range(len(gpu_uuids))]
        for part, gpu in zip(parts, gpu_uuids, strict=True):
            self._fleet.assign_workload(
                gpu_uuid=gpu, workload_id=part, kind=_kind(profile), started_at=at, duration_s=duration_s
            )
        self._parts[workload_id] = parts
        self._kinds[workload_id] = _kind(profile)

    def stop(self, *, workload_id: str) -> None:
        for part in self._parts.pop(workload_id, []):
            self._fleet.release_workload(workload_id=part)
        self._started.discard(workload_id)
        self._interrupted.discard(workload_id)

    def migrate(self, *, workload_id: str, target_gpu_uuids: Sequence[str], at: datetime) -> None:
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
            self.stop(workload_id=workload_id)
            if (report.reason or "").startswith("XID "):
                self._interrupted.add(workload_id)
                return []
            return [RunnerReport(workload_id, "failed", report.at, reason=report.reason or "failed")]
        if parts:
            return []
        self.stop(workload_id=workload_id)
        return [RunnerReport(workload_id, "finished", report.at, reason=report.reason or "completed")]
