"""The process runner's records: a launch to make, a run to follow, and their files as reports."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from libs.common.events.scheduler import AllocationItem, RunSpec
from services.telemetry.adapters.runner.report import RunnerReport

__all__ = [
    "Launch",
    "Run",
    "argv_of",
    "exited_report",
    "failed_doc",
    "int_or_none",
    "now_iso",
    "spec_doc",
    "started_report",
]


@dataclass(slots=True)
class Launch:
    """A placement to launch at the next poll."""

    workload_id: str
    tenant_id: str
    placement_id: str
    allocations: tuple[AllocationItem, ...]
    run: RunSpec | None
    note: str = ""
    moved_from: str | None = None  # the target of a migration from this placement (moves.py)
    restore_dir: Path | None = None  # its checkpoint, fetched: GPUCLOUD_RESTORE_FROM


@dataclass(slots=True)
class Run:
    """A placement's run directory, as the agent follows it."""

    path: Path
    workload_id: str
    placement_id: str
    notes: tuple[str, ...] = ()
    started_told: bool = False
    exit_told: bool = False
    swallow: bool = False  # moved: its end is no exit of the workload
    proc: subprocess.Popen[bytes] | None = None  # the supervisor, when this agent launched it
    runner: str = "process"  # what runs it, as its reports name it (spec.json's "runner")


def spec_doc(
    launch: Launch,
    *,
    env: dict[str, str],
    notes: tuple[str, ...],
    log_quota_bytes: int,
    cgroup_root: Path | None,
) -> dict[str, Any]:
    """spec.json: what the supervisor runs and how, and what re-adoption and a migration need."""
    r = launch.run
    return {
        "workload_id": launch.workload_id,
        "tenant_id": launch.tenant_id,
        "placement_id": launch.placement_id,
        "run": r.model_dump(mode="json") if r is not None else None,
        "argv": argv_of(r),
        "env": env,
        "cwd": r.working_dir if r is not None else None,
        "time_limit_s": r.time_limit_s if r is not None else None,
        "grace_s": r.grace_s if r is not None else 0.0,
        "memory_bytes": r.memory_bytes if r is not None else None,
        "cpu_millis": r.cpu_millis if r is not None else None,
        "log_quota_bytes": log_quota_bytes,
        "cgroup_root": str(cgroup_root) if cgroup_root is not None else None,
        "notes": list(notes),
        "created_at": now_iso(),
    }


def started_report(run: Run, started: dict[str, Any]) -> RunnerReport:
    """The report of started.json: the run's notes and the limits enforced, as notes and as its reason."""
    notes = tuple(n for n in (*run.notes, str(started.get("limits") or "")) if n)
    return RunnerReport(
        workload_id=run.workload_id,
        event="started",
        at=_at(started.get("at")),
        reason="; ".join(notes),
        placement_id=run.placement_id,
        pid=int_or_none(started.get("pid")),
        container_id=cid if isinstance(cid := started.get("container_id"), str) else None,
        runner=run.runner,
        notes=notes,
    )


def argv_of(run: RunSpec | None) -> list[str]:
    """command + args; empty without a command."""
    return [*run.command, *run.args] if run is not None and run.command else []


def exited_report(run: Run, ended: dict[str, Any]) -> RunnerReport:
    """The report of exit.json."""
    reason = str(ended.get("reason") or "failed")
    return RunnerReport(
        workload_id=run.workload_id,
        event="finished" if reason == "succeeded" else "failed",
        at=_at(ended.get("at")),
        reason=str(ended.get("detail") or reason),
        placement_id=run.placement_id,
        runner=run.runner,
        exit_reason=reason if reason in _REASONS else "failed",  # type: ignore[arg-type]
        exit_code=int_or_none(ended.get("exit_code")),
        signal=int_or_none(ended.get("signal")),
    )


_REASONS = frozenset({"succeeded", "failed", "oom_killed", "time_limit", "cancelled", "preempted"})


def failed_doc(detail: str) -> dict[str, Any]:
    """An exit.json for a run that failed without an exit of its own."""
    return {"exit_code": None, "signal": None, "reason": "failed", "detail": detail, "at": now_iso()}


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


def _at(value: object) -> datetime:
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        return datetime.now(UTC)


def int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
