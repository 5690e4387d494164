"""Simulated workload playing: start-up delay, run, finish; migration as checkpoint → transfer → restore."""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from services.telemetry.adapters.sim.physics import PROFILES, ProfileKind

__all__ = ["Phase", "SimWorkload", "WorkloadPlayer", "WorkloadReport", "migration_durations_s"]

# Bandwidths behind the migration step durations: local NVMe write, a 10 Gb/s transfer, NVMe read + H2D.
CHECKPOINT_BYTES_PER_S = 2.0e9
TRANSFER_BYTES_PER_S = 1.25e9
RESTORE_BYTES_PER_S = 3.0e9


class Phase(StrEnum):
    """Where a simulated workload is in its life."""

    STARTING = "starting"
    RUNNING = "running"
    CHECKPOINT = "checkpoint"
    TRANSFER = "transfer"
    RESTORE = "restore"


class WorkloadReport(BaseModel):
    """What the host side of a workload tells the control plane."""

    model_config = ConfigDict(frozen=True)
    workload_id: str = Field(description="Scheduler's workload id")
    gpu_uuid: str = Field(description="GPU the workload is (now) on")
    event: Literal["started", "finished", "failed", "progress"] = Field(description="What happened")
    at: datetime = Field(description="When it happened (simulated time)")
    phase: str | None = Field(default=None, description="Migration step, for progress reports")
    progress_pct: float | None = Field(default=None, description="Migration progress 0-100")
    reason: str | None = Field(default=None, description="Why it failed or finished")


@dataclass(slots=True)
class SimWorkload:
    """Mutable state of one simulated workload."""

    workload_id: str
    gpu_uuid: str
    kind: ProfileKind
    phase: Phase
    phase_ends_at: float | None  # epoch seconds; None = runs until released
    duration_s: float | None
    memory_bytes: int = 0
    target_gpu_uuid: str | None = None
    steps: list[tuple[Phase, float]] = field(default_factory=list)  # remaining migration steps
    migration_started_at: float = 0.0
    migration_total_s: float = 0.0
    remaining_s: float | None = None  # run time left when a migration began


def migration_durations_s(*, memory_bytes: int, kind: ProfileKind) -> list[tuple[Phase, float]]:
    """Step durations for moving a workload's state: fixed overheads plus bytes over bandwidth."""
    return [
        (Phase.CHECKPOINT, 5.0 + memory_bytes / CHECKPOINT_BYTES_PER_S),
        (Phase.TRANSFER, 2.0 + memory_bytes / TRANSFER_BYTES_PER_S),
        (Phase.RESTORE, PROFILES[kind].startup_delay_s + memory_bytes / RESTORE_BYTES_PER_S),
    ]


class WorkloadPlayer:
    """Plays workloads on simulated GPUs; all time is passed in."""

    def __init__(self, *, speed: float = 1.0) -> None:
        self._speed = speed  # > 1 shortens start-up and migration steps (tests); run times are kept
        self._workloads: dict[str, SimWorkload] = {}
        self._by_gpu: dict[str, dict[str, SimWorkload]] = {}  # index: sampling asks per GPU every second
        self._pending: list[WorkloadReport] = []

    def assign(
        self,
        *,
        gpu_uuid: str,
        workload_id: str,
        kind: ProfileKind,
        started_at: datetime,
        duration_s: float | None,
    ) -> SimWorkload:
        """Place a workload; it reports 'started' after its kind's start-up delay."""
        start = started_at.timestamp()
        wl = SimWorkload(
            workload_id=workload_id,
            gpu_uuid=gpu_uuid,
            kind=kind,
            phase=Phase.STARTING,
            phase_ends_at=start + PROFILES[kind].startup_delay_s / self._speed,
            duration_s=duration_s,
        )
        self._attach(wl)
        return wl

    def release(self, *, workload_id: str) -> SimWorkload | None:
        """Stop a workload the scheduler took away; reports nothing (the scheduler already knows)."""
        wl = self._workloads.get(workload_id)
        if wl is not None:
            self._detach(wl)
        return wl

    def migrate(self, *, workload_id: str, target_gpu_uuid: str, now: datetime) -> list[tuple[Phase, float]]:
        """Begin checkpoint → transfer → restore toward another GPU; returns the planned step durations."""
        wl = self._workloads[workload_id]
        planned = migration_durations_s(memory_bytes=wl.memory_bytes, kind=wl.kind)
        steps = [(phase, seconds / self._speed) for phase, seconds in planned]
        t = now.timestamp()
        if wl.phase is Phase.RUNNING:
            wl.remaining_s = None if wl.phase_ends_at is None else max(wl.phase_ends_at - t, 0.0)
        else:
            wl.remaining_s = wl.duration_s
        wl.target_gpu_uuid = target_gpu_uuid
        wl.migration_started_at = t
        wl.migration_total_s = sum(d for _, d in steps)
        wl.phase, first = steps[0]
        wl.phase_ends_at = t + first
        wl.steps = steps[1:]
        return steps

    def resume(
        self, *, workload_id: str, gpu_uuid: str, kind: ProfileKind, memory_bytes: int, now: datetime
    ) -> None:
        """Bring back a workload whose GPU died under it: its last checkpoint is transferred to
        `gpu_uuid` and restored there (there is nothing left to checkpoint on the dead GPU)."""
        steps = migration_durations_s(memory_bytes=memory_bytes, kind=kind)[1:]
        steps = [(phase, seconds / self._speed) for phase, seconds in steps]
        t = now.timestamp()
        (first, first_s), rest = steps[0], steps[1:]
        wl = SimWorkload(
            workload_id=workload_id,
            gpu_uuid=gpu_uuid,
            kind=kind,
            phase=first,
            phase_ends_at=t + first_s,
            duration_s=None,
            memory_bytes=memory_bytes,
            target_gpu_uuid=gpu_uuid,
            steps=rest,
            migration_started_at=t,
            migration_total_s=sum(d for _, d in steps),
        )
        self._attach(wl)

    def fail_gpu(self, *, gpu_uuid: str, now: datetime, reason: str) -> None:
        """Every workload on a failed GPU fails (reported at the next advance)."""
        for wl in self.on_gpu(gpu_uuid):
            self._fail(wl, now=now, reason=reason)

    def fail(self, *, workload_id: str, now: datetime, reason: str) -> None:
        """Fail one workload, e.g. when it runs out of memory."""
        if wl := self._workloads.get(workload_id):
            self._fail(wl, now=now, reason=reason)

    def on_gpu(self, gpu_uuid: str) -> list[SimWorkload]:
        """Workloads currently placed on a GPU."""
        return list(self._by_gpu.get(gpu_uuid, {}).values())

    @property
    def placed_gpus(self) -> Container[str]:
        """GPUs with at least one workload placed (a live view)."""
        return self._by_gpu.keys()

    def get(self, workload_id: str) -> SimWorkload | None:
        """One workload's state, if it is still alive."""
        return self._workloads.get(workload_id)

    def advance(self, *, now: datetime) -> list[WorkloadReport]:
        """Move every workload to `now`; return started/finished/failed/progress reports in order."""
        reports, self._pending = self._pending, []
        t = now.timestamp()
        for wl in list(self._workloads.values()):
            reports.extend(self._step(wl, t=t, now=now))
        return reports

    def _attach(self, wl: SimWorkload) -> None:
        self._workloads[wl.workload_id] = wl
        self._by_gpu.setdefault(wl.gpu_uuid, {})[wl.workload_id] = wl

    def _detach(self, wl: SimWorkload) -> None:
        del self._workloads[wl.workload_id]
        on_gpu = self._by_gpu.get(wl.gpu_uuid, {})
        on_gpu.pop(wl.workload_id, None)
        if not on_gpu:
            self._by_gpu.pop(wl.gpu_uuid, None)

    def _fail(self, wl: SimWorkload, *, now: datetime, reason: str) -> None:
        self._detach(wl)
        self._pending.append(
            WorkloadReport(
                workload_id=wl.workload_id, gpu_uuid=wl.gpu_uuid, event="failed", at=now, reason=reason
            )
        )

    def _step(self, wl: SimWorkload, *, t: float, now: datetime) -> list[WorkloadReport]:
        out: list[WorkloadReport] = []
        while wl.phase_ends_at is not None and t >= wl.phase_ends_at:
            # Reports carry the simulated instant the transition happened, not the polling time.
            report = self._finish_phase(wl, now=datetime.fromtimestamp(wl.phase_ends_at, tz=UTC))
            if report is not None:
                out.append(report)
            if wl.workload_id not in self._workloads:
                return out
        if wl.target_gpu_uuid is not None:
            done = 100.0 * (t - wl.migration_started_at) / wl.migration_total_s
            out.append(self._report(wl, now, "progress", phase=wl.phase, progress=min(done, 99.9)))
        return out

    def _finish_phase(self, wl: SimWorkload, *, now: datetime) -> WorkloadReport | None:
        ended = wl.phase_ends_at
        assert ended is not None
        if wl.phase is Phase.STARTING:
            wl.phase = Phase.RUNNING
            wl.phase_ends_at = None if wl.duration_s is None else ended + wl.duration_s
            return self._report(wl, now, "started")
        if wl.phase is Phase.RUNNING:
            self._detach(wl)
            return self._report(wl, now, "finished", reason="completed")
        if wl.phase is Phase.TRANSFER and wl.target_gpu_uuid is not None:
            self._detach(wl)
            wl.gpu_uuid = wl.target_gpu_uuid  # restore runs on the new GPU
            self._attach(wl)
        if wl.steps:
            wl.phase, step_s = wl.steps.pop(0)
            wl.phase_ends_at = ended + step_s
            return None
        wl.phase, wl.target_gpu_uuid = Phase.RUNNING, None
        # A migrated job resumes from its checkpoint: only the run time it had left remains.
        wl.phase_ends_at = None if wl.remaining_s is None else ended + wl.remaining_s
        return self._report(wl, now, "progress", phase=Phase.RUNNING, progress=100.0)

    @staticmethod
    def _report(
        wl: SimWorkload,
        now: datetime,
        event: Literal["started", "finished", "progress"],
        *,
        phase: Phase | None = None,
        progress: float | None = None,
        reason: str | None = None,
    ) -> WorkloadReport:
        return WorkloadReport(
            workload_id=wl.workload_id,
            gpu_uuid=wl.gpu_uuid,
            event=event,
            at=now,
            phase=phase.value if phase is not None else None,
            progress_pct=progress,
            reason=reason,
        )
