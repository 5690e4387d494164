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
import dataclasses
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
from services.telemetry.adapters.runner.launcher import Launcher
from services.telemetry.adapters.runner.moves import RESTARTED, Mover
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
from services.telemetry.adapters.runner.ship import Shipper

__all__ = ["LAUNCH_TIMEOUT_S", "RESTARTED", "ProcessRunner"]

log = logging.getLogger(__name__)
LAUNCH_TIMEOUT_S = 30.0  # a supervisor that has not said it runs after this long never will
#: Launching stops for the poll after this long; the rest wait for the next poll (the agent polls every
#: few milliseconds while launches are pending), so hundreds at once never stall the agent's loop.
LAUNCH_BUDGET_S = 0.05
_REPO = Path(__file__).resolve().parents[4]
_SUPERVISOR = "services.telemetry.adapters.runner.supervise"


class ProcessRunner:
    """Runs workloads as host processes, one supervisor each, under ``root``."""

    runner_name = "process"  # the runner named in its reports (a subclass runs them otherwise: podman.py)
    supervisor_module = _SUPERVISOR

    def __init__(
        self,
        *,
        root: Path,
        card_memory: Mapping[str, int],
        log_quota_bytes: int,
        cgroup_root: Path | None = None,
        environ: Mapping[str, str] | None = None,
        python: str = sys.executable,
        shipper: Shipper | None = None,
        mover: Mover | None = None,
    ) -> None:
        self.root = root
        self.mover = mover  # with one, a migration moves the workload's checkpoint (moves.py)
        self._restoring: dict[str, Launch] = {}  # workload id -> target launch waiting for its checkpoint
        self._expected: dict[tuple[str, str], str] = {}  # (workload, placement) -> placement it moves from
        self._moves: dict[str, dict[str, Any]] = {}  # run dir name -> how the migration into it went
        self.shipper = shipper  # with one, an exit is told once the run's log and outputs are shipped
        self._holding: dict[str, float] = {}  # run dir name -> since when its exit waits for shipping
        self._card_memory = card_memory
        self._quota = log_quota_bytes
        self._cgroup_root = cgroup_root
        self._environ = dict(os.environ if environ is None else environ)
        self._python = python
        self._runs: dict[str, Run] = {}  # run dir name -> run, ended ones too (a start stays idempotent)
        self._current: dict[str, str] = {}  # workload id -> its run dir name on this agent
        self._pending: dict[str, Launch] = {}  # workload id -> launch at the next poll
        self._unmarked: dict[str, Run] = {}  # reported since the last delivery
        self._fresh: set[str] = set()  # run dir names launched here and not yet seen started or ended
        self._sups: dict[str, dict[str, Any]] = {}  # run dir name -> its supervisor.json (never changes)
        self._broken: set[str] = set()  # run dir names whose last look failed with an OSError (logged once)
        self._unlaunched: list[RunnerReport] = []  # failed exits of launches that could not be written
        self._launcher = Launcher(
            python=python,
            module=self.supervisor_module,
            env=self._supervisor_env(),
            log_path=root / "launcher.log",
        )
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
                runner=str(spec.get("runner") or "process"),
            )
            self._adopt_move(path, spec=spec, stop=stop)
        live = sum(1 for r in self._runs.values() if not r.exit_told)
        if self._runs:
            log.info(
                "adopted %d run(s) under %s, %d not yet reported as ended", len(self._runs), self.root, live
            )

    def _adopt_move(self, path: Path, *, spec: dict[str, Any], stop: dict[str, Any]) -> None:
        """A migration's target still to say it runs, or a source's checkpoint still to upload."""
        if isinstance(spec.get("move"), dict):
            self._moves[path.name] = spec["move"]
        if self.mover is not None and stop.get("reason") == "moved" and stop.get("checkpoint"):
            wl, pl = str(spec["workload_id"]), str(spec["placement_id"])
            self.mover.leave(path=path, workload_id=wl, placement_id=pl)

    # -- the WorkloadRunner port

    def expect_move(self, *, workload_id: str, placement_id: str, from_placement_id: str) -> None:
        """The next start of this placement is the target of a migration from ``from_placement_id``."""
        self._expected[(workload_id, placement_id)] = from_placement_id

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
        name = files.run_dir_name(workload_id=workload_id, placement_id=placement_id)
        source = self._expected.pop((workload_id, placement_id), None)
        if name in self._runs:  # adopted, or a redelivered placement: never a second copy
            self._current[workload_id] = name
            return
        mine = tuple(a for a in allocations if a.gpu_uuid in set(gpu_uuids))
        self._pending[workload_id] = Launch(
            workload_id, tenant_id, placement_id, mine, run, moved_from=source
        )

    def stop(self, *, workload_id: str, reason: StopReason = "cancelled") -> bool:
        if self._pending.pop(workload_id, None) is not None:
            return False  # never launched
        if (waiting := self._restoring.pop(workload_id, None)) is not None:
            if self.mover is not None:
                self.mover.cancel(workload_id=workload_id, placement_id=waiting.placement_id)
            return False  # never launched: it waited for its checkpoint
        name = self._current.pop(workload_id, None)
        run = self._runs.get(name) if name is not None else None
        if run is None or run.exit_told:
            return False
        if reason == "moved" and not run.swallow and _ended_itself(run.path):
            return True  # it ended before the move (its exit held back for shipping): told as usual
        run.swallow = run.swallow or reason == "moved"
        ask = reason == "moved" and self._checkpoints(run)
        if not (run.path / files.EXIT).exists():
            files.write_json(run.path / files.STOP, {"reason": reason, "at": now_iso(), "checkpoint": ask})
            self._wake(run)
        if ask and self.mover is not None:  # ended already: its manifest says it could not checkpoint
            self.mover.leave(path=run.path, workload_id=run.workload_id, placement_id=run.placement_id)
        return not run.swallow

    def _checkpoints(self, run: Run) -> bool:
        """Whether a move of this run asks it to checkpoint: its spec says how, and a store carries it."""
        spec = files.read_json(run.path / files.SPEC) or {}
        return self.mover is not None and isinstance((spec.get("run") or {}).get("checkpoint"), dict)

    def migrate(
        self,
        *,
        workload_id: str,
        placement_id: str,
        target_gpu_uuids: Sequence[str],
        allocations: Sequence[AllocationItem],
        at: datetime,
    ) -> bool:
        unlaunched = self._pending.get(workload_id)
        launch = unlaunched or self._launch_of(workload_id)
        if launch is None:
            return False
        if self.stop(workload_id=workload_id, reason="moved"):
            return True  # it ended by itself first: its exit is told, and no target is launched
        mine = tuple(a for a in allocations if a.gpu_uuid in set(target_gpu_uuids))
        note = f"{RESTARTED}: it had not started where it was" if unlaunched is not None else ""
        self._pending[workload_id] = Launch(
            workload_id, launch.tenant_id, placement_id, mine, launch.run, note, launch.placement_id
        )
        return False

    def set_profile(self, *, workload_id: str, profile: str) -> bool:
        return False  # a process's use of its GPUs is its own

    def poll(self, *, now: datetime) -> list[RunnerReport]:
        self._launch_due()
        self._launch_lost()
        reports: list[RunnerReport] = self.mover.take_reports() if self.mover is not None else []
        reports += self._take_unlaunched()
        for run in list(self._runs.values()):
            if not run.exit_told:
                reports.extend(self._look_safely(run))
        return reports

    # -- the agent's quick poll, beside its sample ticks (service/agent/prompt.py)

    def awaiting_start(self) -> bool:
        """Whether launches are pending or a launched run is not yet seen started (or ended)."""
        if self._fresh:
            self._fresh = {n for n in self._fresh if n in self._runs and _unseen(self._runs[n])}
        return bool(self._pending or self._fresh)

    def poll_starts(self, *, now: datetime) -> list[RunnerReport]:
        """A poll of what is pending and of the runs not yet seen started that wrote their start or end:
        cheap enough to run every few milliseconds with hundreds of runs under way. poll() looks at every
        run (a supervisor that died before either is found there)."""
        self._launch_due()
        reports = self._take_unlaunched()
        for name in list(self._fresh):
            run = self._runs.get(name)
            if run is not None and not run.exit_told and _news(run.path):
                reports.extend(self._look_safely(run))
        return reports

    def _take_unlaunched(self) -> list[RunnerReport]:
        out, self._unlaunched = self._unlaunched, []
        return out

    def delivered(self) -> None:
        for run in self._unmarked.values():
            with contextlib.suppress(FileNotFoundError):  # its directory was removed by hand
                # Not fsync'd: one per report stalled the agent's loop behind hundreds of starts; what a
                # power cut loses of it is told again, which the scheduler applies idempotently.
                files.write_json(
                    run.path / files.REPORTED,
                    {"started": run.started_told, "exit": run.exit_told},
                    durable=False,
                )
        self._unmarked.clear()

    # -- migrating into this host

    def _restores(self, launch: Launch) -> bool:
        """Whether a migration's target waits for its checkpoint first; when not, its note says why."""
        if launch.moved_from is None or launch.note:
            return False
        checkpoint = launch.run.checkpoint if launch.run is not None else None
        if checkpoint is None or self.mover is None:
            lacks = "its run spec asks for no checkpoint" if checkpoint is None else "no object store here"
            launch.note = f"{RESTARTED}: {lacks}"
            return False
        name = files.run_dir_name(workload_id=launch.workload_id, placement_id=launch.placement_id)
        self.mover.restore(
            path=self.root / name,
            workload_id=launch.workload_id,
            placement_id=launch.placement_id,
            source_placement_id=launch.moved_from,
        )
        self._restoring[launch.workload_id] = launch
        return True

    def _restored(self) -> list[Launch]:
        """Targets whose checkpoint is here (or will not come): each with its restore dir and note."""
        ready: list[Launch] = []
        for done in self.mover.take_restored() if self.mover is not None else []:
            launch = self._restoring.get(done.workload_id)
            if launch is not None and launch.placement_id == done.placement_id:
                del self._restoring[done.workload_id]
                launch.note, launch.restore_dir = done.note, done.path
                ready.append(launch)
        return ready

    # -- launching

    def _launch_due(self) -> None:
        """Launch pending placements in their order, within LAUNCH_BUDGET_S (at least one), and the
        migration targets whose checkpoint came."""
        until = time.monotonic() + LAUNCH_BUDGET_S
        due: list[Launch] = []
        while self._pending and (not due or time.monotonic() < until):
            due.append(self._pending.pop(next(iter(self._pending))))
            self._launch_one(due[-1])
        for launch in self._restored():
            self._launch_one(launch)

    def _launch_one(self, launch: Launch) -> None:
        if self._restores(launch):
            return
        name = files.run_dir_name(workload_id=launch.workload_id, placement_id=launch.placement_id)
        try:
            self._launch(launch)
        except OSError as e:  # its run directory cannot be written: it fails, the others go on
            self._unlaunch(launch, name=name, error=e)
            return
        self._fresh.add(name)

    def _unlaunch(self, launch: Launch, *, name: str, error: OSError) -> None:
        """A launch whose run directory could not be written: told as failed, once (not on disk)."""
        log.error(
            "workload %s placement %s: cannot launch in %s: %s",
            launch.workload_id,
            launch.placement_id,
            self.root / name,
            error,
        )
        run = Run(
            path=self.root / name,
            workload_id=launch.workload_id,
            placement_id=launch.placement_id,
            started_told=True,
            exit_told=True,
            runner=self.runner_name,
        )
        self._runs[name] = run
        self._current[launch.workload_id] = name
        self._fresh.discard(name)
        self._unlaunched.append(
            exited_report(run, failed_doc(f"its run directory could not be written: {error}"))
        )

    def _launch_of(self, workload_id: str) -> Launch | None:
        name = self._current.get(workload_id)
        spec = files.read_json(self._runs[name].path / files.SPEC) if name in self._runs else None
        if spec is None:
            return None
        run = RunSpec.model_validate(spec["run"]) if spec.get("run") is not None else None
        return Launch(workload_id, str(spec["tenant_id"]), str(spec["placement_id"]), (), run)

    def _launch_lost(self) -> None:
        """Start again the supervisors whose launch line died with a killed launcher."""
        for path in self._launcher.lost(forked=lambda p: (p / files.CLAIM).exists()):  # or given up
            run = self._runs.get(path.name)
            if run is None or run.proc is not None or run.exit_told:
                continue
            log.warning(
                "workload %s placement %s: its launcher died before forking the supervisor; launching again",
                run.workload_id,
                run.placement_id,
            )
            run.proc = self._supervise(path)

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
            restore_from=launch.restore_dir,
        )
        notes = tuple(n for n in (launch.note, *binding.notes) if n)
        doc = spec_doc(
            launch,
            env=binding.env,
            notes=notes,
            log_quota_bytes=self._quota,
            cgroup_root=self._cgroup_root,
        )
        doc = self._spec(doc, launch=launch, path=path, devices=binding.devices)
        if launch.moved_from is not None:
            restored = launch.restore_dir is not None
            doc["move"] = {"from_placement_id": launch.moved_from, "restored": restored, "note": launch.note}
            self._moves[name] = doc["move"]
        files.write_json(path / files.SPEC, doc)
        notes = tuple(doc["notes"])
        run = Run(
            path=path,
            workload_id=launch.workload_id,
            placement_id=launch.placement_id,
            notes=notes,
            runner=self.runner_name,
        )
        self._runs[name] = run
        self._current[launch.workload_id] = name
        why = self._refusal(launch.run)
        if why is not None:
            files.write_json(path / files.EXIT, failed_doc(why))
            return
        run.proc = self._supervise(path)
        log.info("workload %s placement %s launched in %s", launch.workload_id, launch.placement_id, path)

    # -- what a subclass runs differently (podman.py)

    def _spec(
        self, doc: dict[str, Any], *, launch: Launch, path: Path, devices: tuple[str, ...]
    ) -> dict[str, Any]:
        """spec.json as the supervisor reads it: this runner's is the process's."""
        return doc

    def _refusal(self, run: RunSpec | None) -> str | None:
        """Why this runner cannot run the spec; None when it can."""
        if argv_of(run):
            return None
        why = "no run spec: nothing to execute" if run is None else "the run spec has no command"
        return f"{why} (the process runner runs a command)"

    def _started_doc(self, run: Run) -> dict[str, Any] | None:
        """started.json once the workload runs; None before."""
        return files.read_json(run.path / files.STARTED)

    def _supervisor_env(self) -> dict[str, str]:
        return {"PATH": self._environ.get("PATH", os.defpath), "PYTHONPATH": str(_REPO)}

    def _supervise(self, path: Path) -> subprocess.Popen[bytes] | None:
        """Start the run's supervisor: forked by the launcher (then watched by its supervisor.json, like
        an adopted run), else as a process of its own."""
        if self._launcher.launch(path):
            return None
        env = self._supervisor_env()
        with open(path / "supervisor.log", "ab") as err:
            return subprocess.Popen(  # noqa: S603 - our own module, by absolute interpreter path
                # -S: no site (its .pth scan was a third of the start); the supervisor is stdlib only.
                [self._python, "-S", "-m", self.supervisor_module, str(path)],
                cwd=path,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                start_new_session=True,  # outlives the agent, and no terminal's signals reach it
                close_fds=True,
            )

    # -- watching

    def _look_safely(self, run: Run) -> list[RunnerReport]:
        """_look, where an OSError fails only this run: a removed run directory is told as failed; any
        other is logged once and looked at again next poll."""
        try:
            reports = self._look(run)
        except OSError as e:
            return self._broken_run(run, e)
        self._broken.discard(run.path.name)
        return reports

    def _broken_run(self, run: Run, error: OSError) -> list[RunnerReport]:
        name = run.path.name
        if name not in self._broken:
            log.error(
                "workload %s placement %s: cannot read %s: %s",
                run.workload_id,
                run.placement_id,
                run.path,
                error,
            )
            self._broken.add(name)
        if run.path.is_dir():
            return []
        run.exit_told = True  # nothing is left to watch, nor to mark as reported
        self._fresh.discard(name)
        self._holding.pop(name, None)
        self._broken.discard(name)
        if run.swallow:
            return []
        return [exited_report(run, failed_doc("its run directory was removed"))]

    def _look(self, run: Run) -> list[RunnerReport]:
        reports: list[RunnerReport] = []
        if not run.started_told and (started := self._started_doc(run)) is not None:
            run.started_told = True
            self._unmarked[run.path.name] = run
            if not run.swallow:
                told = started_report(run, started)
                reports.append(told)
                if (move := self._moves.get(run.path.name)) is not None:
                    reports.append(_running(told, move))
        ended = files.read_json(run.path / files.EXIT)
        if ended is None:
            ended = self._lost(run)
        if ended is not None:
            self._fresh.discard(run.path.name)  # seen ended: its exit may wait for shipping, not a quick poll
        if ended is not None and not self._held(run, ended):
            run.exit_told = True
            self._unmarked[run.path.name] = run
            if run.proc is not None:
                run.proc.poll()  # reap it
            if not (run.swallow or ended.get("stop") == "moved"):
                reports.append(exited_report(run, ended))
        return reports

    def _held(self, run: Run, ended: dict[str, Any]) -> bool:
        """An exit to tell waits until its log and outputs are in the object store, or give_up_s."""
        moved = run.swallow or ended.get("stop") == "moved"
        if self.shipper is None or moved or self.shipper.finalized(run.path):
            self._holding.pop(run.path.name, None)
            return False
        since = self._holding.setdefault(run.path.name, time.monotonic())
        if time.monotonic() - since < self.shipper.give_up_s:
            return True
        log.error(
            "workload %s placement %s: its log and outputs did not reach the object store %s within %.0fs; "
            "its exit is reported without them",
            run.workload_id,
            run.placement_id,
            self.shipper.store.url,
            self.shipper.give_up_s,
        )
        self._holding.pop(run.path.name, None)
        return False

    def _lost(self, run: Run) -> dict[str, Any] | None:
        """An exit for a run whose supervisor is gone without writing one (killed), or never came up."""
        if run.proc is not None:
            if run.proc.poll() is None:
                return None
            doc = files.read_json(run.path / files.EXIT)  # it may have written it just before exiting
            return doc if doc is not None else self._orphaned(run, "its supervisor died")
        sup = self._sups.get(run.path.name) or files.read_json(run.path / files.SUPERVISOR)
        if sup is not None:
            self._sups[run.path.name] = sup
        if sup is None:
            age = time.time() - (run.path / files.SPEC).stat().st_mtime
            if age <= LAUNCH_TIMEOUT_S or not files.claim(run.path):
                return None  # still to come, or it came up just now (its supervisor.json follows)
            return self._orphaned(run, "its supervisor never started")
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


def _running(started: RunnerReport, move: dict[str, Any]) -> RunnerReport:
    """A migration's last step: the workload runs on its new placement, from its checkpoint or not."""
    return dataclasses.replace(
        started,
        event="progress",
        phase="running",
        percent=100.0,
        reason=str(move.get("note") or ""),
        pid=None,
        notes=(),
        restored=bool(move.get("restored")),
    )


def _unseen(run: Run) -> bool:
    """Neither its start nor its end seen yet."""
    return not (run.started_told or run.exit_told)


def _ended_itself(path: Path) -> bool:
    """Whether the run wrote its exit and that exit is not a move's stop."""
    ended = files.read_json(path / files.EXIT)
    return ended is not None and ended.get("stop") != "moved"


def _news(path: Path) -> bool:
    """Whether the run wrote its start or its end (two stats: cheaper than reading either)."""
    return os.path.exists(path / files.STARTED) or os.path.exists(path / files.EXIT)
