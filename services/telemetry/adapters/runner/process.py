"""The process runner: each workload is the spec's command under its own supervisor on this host.

A start only records the intent; the next poll launches it. Replaying the scheduler topic at agent start
applies a long-ended placement's placed and ended events back to back, so it never launches. Every
placement has a run directory under the agent's root (files.py). Its existence is what makes a start
idempotent: an agent restarted (or a replay) finds the directory and adopts the run instead of starting
it again; a run that ended meanwhile is reported from its exit.json. What was reported is recorded in
reported.json once the agent's broker acknowledged it (delivered), so an exit is told at least once and,
after that, never again.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from libs.common.events.scheduler import AllocationItem, RunSpec
from services.telemetry.adapters.runner import files
from services.telemetry.adapters.runner.binding import bind, mps_pipe_dir
from services.telemetry.adapters.runner.exits import StopReason
from services.telemetry.adapters.runner.report import RunnerReport
from services.telemetry.adapters.runner.runs import (
    Launch,
    Run,
    argv_of,
    exited_report,
    failed_doc,
    int_or_none,
    now_iso,
    spec_doc,
    started_report,
)

__all__ = ["LAUNCH_TIMEOUT_S", "RESTARTED", "ProcessRunner"]

log = logging.getLogger(__name__)
LAUNCH_TIMEOUT_S = 30.0  # a supervisor that has not said it runs after this long never will
RESTARTED = "restarted from the start on the new GPUs (checkpoint and restore are not built yet)"
_REPO = Path(__file__).resolve().parents[4]
_SUPERVISOR = "services.telemetry.adapters.runner.supervise"


class ProcessRunner:
    """Runs workloads as host processes, one supervisor each, under ``root``."""

    def __init__(
        self,
        *,
        root: Path,
        card_memory: Mapping[str, int],
        log_quota_bytes: int,
        cgroup_root: Path | None = None,
        environ: Mapping[str, str] | None = None,
        python: str = sys.executable,
    ) -> None:
        self.root = root
        self._card_memory = card_memory
        self._quota = log_quota_bytes
        self._cgroup_root = cgroup_root
        self._environ = dict(os.environ if environ is None else environ)
        self._python = python
        self._runs: dict[str, Run] = {}  # run dir name -> run, ended ones too (a start stays idempotent)
        self._current: dict[str, str] = {}  # workload id -> its run dir name on this agent
        self._pending: dict[str, Launch] = {}  # workload id -> launch at the next poll
        self._unmarked: dict[str, Run] = {}  # reported since the last delivery
        root.mkdir(parents=True, exist_ok=True)
        self._adopt()

    @property
    def runs(self) -> int:
        """Run directories known (adopted or launched)."""
        return len(self._runs)

    def _adopt(self) -> None:
        for path in sorted(self.root.iterdir()):
            spec = files.read_json(path / files.SPEC)
            if spec is None:
                continue
            told = files.read_json(path / files.REPORTED) or {}
            stop = files.read_json(path / files.STOP) or {}
            self._runs[path.name] = Run(
                path=path,
                workload_id=str(spec["workload_id"]),
                placement_id=str(spec["placement_id"]),
                notes=tuple(spec.get("notes", ())),
                started_told=bool(told.get("started")),
                exit_told=bool(told.get("exit")),
                swallow=stop.get("reason") == "moved",
            )
        live = sum(1 for r in self._runs.values() if not r.exit_told)
        if self._runs:
            log.info(
                "adopted %d run(s) under %s, %d not yet reported as ended", len(self._runs), self.root, live
            )

    # -- the WorkloadRunner port

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
    ) -> None:
        name = files.run_dir_name(workload_id=workload_id, placement_id=placement_id)
        if name in self._runs:  # adopted, or a redelivered placement: never a second copy
            self._current[workload_id] = name
            return
        mine = tuple(a for a in allocations if a.gpu_uuid in set(gpu_uuids))
        self._pending[workload_id] = Launch(workload_id, tenant_id, placement_id, mine, run)

    def stop(self, *, workload_id: str, reason: StopReason = "cancelled") -> bool:
        if self._pending.pop(workload_id, None) is not None:
            return False  # never launched
        name = self._current.pop(workload_id, None)
        run = self._runs.get(name) if name is not None else None
        if run is None or run.exit_told:
            return False
        run.swallow = run.swallow or reason == "moved"
        if not (run.path / files.EXIT).exists():
            files.write_json(run.path / files.STOP, {"reason": reason, "at": now_iso()})
            self._wake(run)
        return not run.swallow

    def migrate(
        self,
        *,
        workload_id: str,
        placement_id: str,
        target_gpu_uuids: Sequence[str],
        allocations: Sequence[AllocationItem],
        at: datetime,
    ) -> None:
        launch = self._pending.get(workload_id) or self._launch_of(workload_id)
        if launch is None:
            return
        self.stop(workload_id=workload_id, reason="moved")
        mine = tuple(a for a in allocations if a.gpu_uuid in set(target_gpu_uuids))
        self._pending[workload_id] = Launch(
            workload_id, launch.tenant_id, placement_id, mine, launch.run, note=RESTARTED
        )

    def set_profile(self, *, workload_id: str, profile: str) -> bool:
        return False  # a process's use of its GPUs is its own

    def poll(self, *, now: datetime) -> list[RunnerReport]:
        pending, self._pending = self._pending, {}
        for launch in pending.values():
            self._launch(launch)
        reports: list[RunnerReport] = []
        for run in self._runs.values():
            if not run.exit_told:
                reports.extend(self._look(run))
        return reports

    def delivered(self) -> None:
        for run in self._unmarked.values():
            with contextlib.suppress(FileNotFoundError):  # its directory was removed by hand
                files.write_json(
                    run.path / files.REPORTED, {"started": run.started_told, "exit": run.exit_told}
                )
        self._unmarked.clear()

    # -- launching

    def _launch_of(self, workload_id: str) -> Launch | None:
        name = self._current.get(workload_id)
        spec = files.read_json(self._runs[name].path / files.SPEC) if name in self._runs else None
        if spec is None:
            return None
        run = RunSpec.model_validate(spec["run"]) if spec.get("run") is not None else None
        return Launch(workload_id, str(spec["tenant_id"]), str(spec["placement_id"]), (), run)

    def _launch(self, launch: Launch) -> None:
        name = files.run_dir_name(workload_id=launch.workload_id, placement_id=launch.placement_id)
        path = self.root / name
        for sub in (files.OUTPUT_DIR, files.CHECKPOINT_DIR, "tmp"):
            (path / sub).mkdir(parents=True, exist_ok=True)
        binding = bind(
            workload_id=launch.workload_id,
            tenant_id=launch.tenant_id,
            allocations=launch.allocations,
            card_memory=self._card_memory,
            run_env=launch.run.env if launch.run is not None else {},
            base_env=self._environ,
            run_dir=path,
            mps_dir=mps_pipe_dir(self._environ),
        )
        notes = tuple(n for n in (launch.note, *binding.notes) if n)
        files.write_json(
            path / files.SPEC,
            spec_doc(
                launch,
                env=binding.env,
                notes=notes,
                log_quota_bytes=self._quota,
                cgroup_root=self._cgroup_root,
            ),
        )
        run = Run(path=path, workload_id=launch.workload_id, placement_id=launch.placement_id, notes=notes)
        self._runs[name] = run
        self._current[launch.workload_id] = name
        argv = argv_of(launch.run)
        if not argv:
            why = "no run spec: nothing to execute" if launch.run is None else "the run spec has no command"
            files.write_json(path / files.EXIT, failed_doc(f"{why} (the process runner runs a command)"))
            return
        run.proc = self._supervise(path)
        log.info("workload %s placement %s launched in %s", launch.workload_id, launch.placement_id, path)

    def _supervise(self, path: Path) -> subprocess.Popen[bytes]:
        env = {"PATH": self._environ.get("PATH", os.defpath), "PYTHONPATH": str(_REPO)}
        with open(path / "supervisor.log", "ab") as err:
            return subprocess.Popen(  # noqa: S603 - our own module, by absolute interpreter path
                [self._python, "-m", _SUPERVISOR, str(path)],
                cwd=path,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                start_new_session=True,  # outlives the agent, and no terminal's signals reach it
                close_fds=True,
            )

    # -- watching

    def _look(self, run: Run) -> list[RunnerReport]:
        reports: list[RunnerReport] = []
        if not run.started_told and (started := files.read_json(run.path / files.STARTED)) is not None:
            run.started_told = True
            self._unmarked[run.path.name] = run
            if not run.swallow:
                reports.append(started_report(run, started))
        ended = files.read_json(run.path / files.EXIT)
        if ended is None:
            ended = self._lost(run)
        if ended is not None:
            run.exit_told = True
            self._unmarked[run.path.name] = run
            if run.proc is not None:
                run.proc.poll()  # reap it
            if not (run.swallow or ended.get("stop") == "moved"):
                reports.append(exited_report(run, ended))
        return reports

    def _lost(self, run: Run) -> dict[str, Any] | None:
        """An exit for a run whose supervisor is gone without writing one (killed), or never came up."""
        if run.proc is not None:
            if run.proc.poll() is None:
                return None
            doc = files.read_json(run.path / files.EXIT)  # it may have written it just before exiting
            return doc if doc is not None else self._orphaned(run, "its supervisor died")
        sup = files.read_json(run.path / files.SUPERVISOR)
        if sup is None:
            age = time.time() - (run.path / files.SPEC).stat().st_mtime
            return self._orphaned(run, "its supervisor never started") if age > LAUNCH_TIMEOUT_S else None
        if files.process_start(int(sup["pid"])) == sup.get("start"):
            return None  # alive: adopted
        return files.read_json(run.path / files.EXIT) or self._orphaned(run, "its supervisor died")

    def _orphaned(self, run: Run, why: str) -> dict[str, Any]:
        """End what is left of a run nobody supervises (its process group), and record it as failed."""
        started = files.read_json(run.path / files.STARTED) or {}
        pid = int_or_none(started.get("pid"))
        if pid is not None and files.process_start(pid) == started.get("start"):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        doc = failed_doc(f"{why}; the workload was killed")
        files.write_json(run.path / files.EXIT, doc)
        return doc

    def _wake(self, run: Run) -> None:
        """SIGUSR1 to the run's supervisor, verified to be it (it also finds stop.json by itself)."""
        sup = files.read_json(run.path / files.SUPERVISOR)
        if sup is not None and files.process_start(int(sup["pid"])) == sup.get("start"):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(sup["pid"]), signal.SIGUSR1)
