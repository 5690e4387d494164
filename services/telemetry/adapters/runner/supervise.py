"""python -m services.telemetry.adapters.runner.supervise <run dir>: one workload's supervisor.

Started by the process runner in its own session, so it outlives the agent. It runs the command of
``spec.json`` in its own process group (in a cgroup v2 group with the spec's limits where the host
allows), copies its stdout and stderr into ``output.log`` under a size quota, and records
``started.json`` once the command is exec'd and ``exit.json`` when it ends. A stop is asked by writing
``stop.json`` (and SIGUSR1 to wake it; it also looks every POLL_S): SIGTERM to the process group, then
SIGKILL after the grace. The same happens at the time limit. Standard library only: it starts fast.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from services.telemetry.adapters.runner import cgroups, files
from services.telemetry.adapters.runner.checkpointing import Checkpointing, wanted
from services.telemetry.adapters.runner.exits import StopReason, describe, exit_reason

POLL_S = 0.2  # how often it looks for stop.json when no signal woke it
DRAIN_S = 1.0  # after the exit, how long output still held by a straggler is read
READ = 65536
#: Where output.log's bytes sit in the whole output: rewritten at each rotation, read by the shipper
#: (ship.py), which tells the files apart by inode (a rotation renames output.log to output.log.1).
LOG_STATE = "log.json"


def _now() -> str:
    return datetime.now(UTC).isoformat()


class LogFile:
    """Appends output, keeping at most ``quota`` bytes in output.log and output.log.1 together."""

    def __init__(self, path: Path, *, quota: int) -> None:
        self._path = path
        self._half = max(quota // 2, 1)
        self._out = open(path, "ab")  # noqa: SIM115 - held for the workload's life
        self._size = self._out.tell()
        self.rotations = 0
        self._base = 0  # bytes of the whole output before output.log's first
        self._prev_base = 0  # ... and before output.log.1's
        self._record()

    def write(self, data: bytes) -> None:
        while data:
            room = self._half - self._size
            if room <= 0:
                self._rotate()
                continue
            part, data = data[:room], data[room:]
            self._out.write(part)
            self._size += len(part)
        self._out.flush()

    def _rotate(self) -> None:
        self._out.close()
        os.replace(self._path, self._path.with_name(self._path.name + ".1"))
        self._out = open(self._path, "ab")  # noqa: SIM115 - see __init__
        self._prev_base, self._base = self._base, self._base + self._size
        self._size = 0
        self.rotations += 1
        self._record()

    def _record(self) -> None:
        doc = {
            "rotations": self.rotations,
            "inode": os.fstat(self._out.fileno()).st_ino,
            "base": self._base,
            "prev_base": self._prev_base,
        }
        # Readers are on this host (no fsync); a failed record only pauses shipping, never the output.
        with contextlib.suppress(OSError):
            files.write_json(self._path.with_name(LOG_STATE), doc, durable=False)

    def close(self) -> None:
        self._out.close()


class Supervisor:
    """Runs one workload to its end."""

    def __init__(self, run_dir: Path, spec: dict[str, Any]) -> None:
        self._dir = run_dir
        self._spec = spec
        self._grace = float(spec.get("grace_s") or 0.0)
        self._stop: StopReason | None = None
        self._time_limit = False
        self._kill_at: float | None = None
        self._killed = False
        self._termed = False
        self._checkpoint: Checkpointing | None = None  # a move's checkpoint request, before its SIGTERM
        self._move_grace: object = None
        self._wake_r, self._wake_w = os.pipe()

    def claim(self) -> bool:
        """Whether this is the run's one supervisor: a second one (its launch line was sent again
        because the launcher died, though it had forked the first), or one that came up after the agent
        recorded the run as never started, ends without touching anything."""
        if files.claim(self._dir):
            return True
        print(f"{self._dir}: the run is claimed (by another supervisor, or given up)", file=sys.stderr)
        return False

    def run(self) -> int:
        if not self.claim():
            return 0
        files.write_json(
            self._dir / files.SUPERVISOR, {"pid": os.getpid(), "start": files.process_start(os.getpid())}
        )
        self._signals()
        group, limits = cgroups.prepare(
            name=self._dir.name,
            root=Path(self._spec["cgroup_root"]) if self._spec.get("cgroup_root") else None,
            memory_bytes=self._spec.get("memory_bytes"),
            cpu_millis=self._spec.get("cpu_millis"),
        )
        log = LogFile(self._dir / files.LOG, quota=int(self._spec.get("log_quota_bytes") or 1 << 26))
        try:
            self._supervise(group, limits=limits, log=log)
        finally:
            log.close()
            if group is not None:
                group.remove()
        return 0

    def _signals(self) -> None:
        os.set_blocking(self._wake_w, False)
        signal.set_wakeup_fd(self._wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGUSR1, lambda *_: None)
        signal.signal(signal.SIGTERM, lambda *_: self._ask_stop("cancelled"))
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    def _supervise(self, group: cgroups.Cgroup | None, *, limits: str, log: LogFile) -> None:
        read_end, write_end = os.pipe()
        try:
            child = self._spawn(group, write_end)
        except OSError as exc:
            os.close(read_end)
            code = 126 if isinstance(exc, PermissionError) else 127
            self._exited(
                exit_code=code,
                sig=None,
                oom=0,
                detail=f"could not start {self._spec['argv'][0]!r}: {exc.strerror or exc}",
            )
            return
        finally:
            os.close(write_end)
        files.write_json(
            self._dir / files.STARTED,
            {"pid": child.pid, "start": files.process_start(child.pid), "at": _now(), "limits": limits},
        )
        status = self._wait(child, read_end, log=log)
        while self._checkpoint is not None and self._checkpoint.poll(workload_alive=False) is None:
            time.sleep(0.05)  # its checkpoint command still runs (bounded by the request's timeout)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pid, signal.SIGKILL)  # what it left behind in its group ends with it
        self._drain(read_end, log=log)
        oom = group.oom_kills() if group is not None else 0
        if status < 0:
            self._exited(exit_code=None, sig=-status, oom=oom, detail="")
        else:
            self._exited(exit_code=status, sig=None, oom=oom, detail="")

    def _spawn(self, group: cgroups.Cgroup | None, out: int) -> subprocess.Popen[bytes]:
        argv = list(self._spec["argv"])
        if not argv:
            raise FileNotFoundError(2, "no command in the run spec")
        return subprocess.Popen(  # noqa: S603 - the tenant's command is what this process exists to run
            argv,
            env=self._spec["env"],
            cwd=self._spec.get("cwd") or str(self._dir),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            process_group=0,
            preexec_fn=group.join if group is not None else None,
            close_fds=True,
        )

    def _wait(self, child: subprocess.Popen[bytes], read_end: int, *, log: LogFile) -> int:
        """Copy output and act on stops and limits until the child is reaped; its returncode."""
        started = time.monotonic()
        limit = self._spec.get("time_limit_s")
        deadline = started + float(limit) if limit else None
        with selectors.DefaultSelector() as sel:
            sel.register(self._wake_r, selectors.EVENT_READ)
            sel.register(read_end, selectors.EVENT_READ)
            while (status := child.poll()) is None:
                for key, _ in sel.select(self._timeout(deadline)):
                    if key.fd == self._wake_r:
                        os.read(self._wake_r, 512)
                    elif not self._copy(read_end, log):
                        sel.unregister(read_end)
                self._act(child, deadline)
        return status

    def _timeout(self, deadline: float | None) -> float:
        due = [t for t in (deadline, self._kill_at) if t is not None and not self._killed]
        return max(0.0, min([POLL_S, *(t - time.monotonic() for t in due)]))

    def _act(self, child: subprocess.Popen[bytes], deadline: float | None) -> None:
        if self._stop is None and (request := files.read_json(self._dir / files.STOP)) is not None:
            if (ask := wanted(self._spec, request)) is not None:
                self._ask_checkpoint(child, ask, grace=request.get("grace_s"))
            else:
                self._ask_stop(request.get("reason", "cancelled"), grace=request.get("grace_s"))
        if self._checkpoint is not None and self._kill_at is None and self._checkpoint.poll() is not None:
            wait = self._move_grace if isinstance(self._move_grace, int | float) else self._grace
            self._kill_at = time.monotonic() + float(wait)  # checkpointed or not: now SIGTERM, grace
        if (
            deadline is not None
            and self._stop is None
            and not self._time_limit
            and time.monotonic() >= deadline
        ):
            self._time_limit = True
            self._kill_at = time.monotonic() + self._grace
        if self._kill_at is not None and not self._killed:
            if not self._termed:
                self._termed = True
                self._signal(child, signal.SIGTERM)
            if time.monotonic() >= self._kill_at:
                self._killed = True
                self._signal(child, signal.SIGKILL)

    def _ask_checkpoint(self, child: subprocess.Popen[bytes], ask: dict[str, Any], *, grace: object) -> None:
        """A move that asks for a checkpoint: request it now; the SIGTERM waits for its result."""
        self._stop, self._move_grace = "moved", grace
        env: dict[str, str] = self._spec["env"]
        where = env.get("GPUCLOUD_CHECKPOINT_DIR") or str(self._dir / files.CHECKPOINT_DIR)
        self._checkpoint = Checkpointing(ask, checkpoint_dir=Path(where), run_dir=self._dir)
        self._checkpoint.begin(
            send=lambda sig: self._signal(child, sig), env=env, cwd=self._spec.get("cwd") or str(self._dir)
        )

    def _ask_stop(self, reason: str, *, grace: object = None) -> None:
        if self._stop is not None:
            return
        self._stop = reason if reason in ("cancelled", "preempted", "moved") else "cancelled"  # type: ignore[assignment]
        wait = float(grace) if isinstance(grace, int | float) else self._grace
        due = time.monotonic() + wait
        self._kill_at = due if self._kill_at is None else min(self._kill_at, due)

    @staticmethod
    def _signal(child: subprocess.Popen[bytes], sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pid, sig)

    @staticmethod
    def _copy(fd: int, log: LogFile) -> bool:
        data = os.read(fd, READ)
        if data:
            log.write(data)
        return bool(data)

    def _drain(self, fd: int, *, log: LogFile) -> None:
        os.set_blocking(fd, False)
        until = time.monotonic() + DRAIN_S
        with contextlib.suppress(OSError):
            while time.monotonic() < until:
                try:
                    if not self._copy(fd, log):
                        break
                except BlockingIOError:
                    time.sleep(0.01)
        os.close(fd)

    def _exited(self, *, exit_code: int | None, sig: int | None, oom: int, detail: str) -> None:
        reason = exit_reason(
            exit_code=exit_code,
            signal=sig,
            stop_reason=self._stop,
            time_limit=self._time_limit,
            oom_kills=oom,
        )
        said = detail or describe(exit_code=exit_code, signal=sig, reason=reason, killed=self._killed)
        doc: dict[str, Any] = {
            "exit_code": exit_code,
            "signal": sig,
            "reason": reason,
            "detail": said,
            "at": _now(),
        }
        if self._checkpoint is not None and self._checkpoint.result is not None:
            doc["checkpoint"] = self._checkpoint.result.doc()
        files.write_json(self._dir / files.EXIT, doc | {"stop": self._stop, "oom_kills": oom})


def main(argv: list[str]) -> int:
    """Supervise the workload of the run directory argv[0]."""
    if len(argv) != 1:
        print("usage: python -m services.telemetry.adapters.runner.supervise <run dir>", file=sys.stderr)
        return 2
    run_dir = Path(argv[0])
    spec = files.read_json(run_dir / files.SPEC)
    if spec is None:
        print(f"no readable {files.SPEC} in {run_dir}", file=sys.stderr)
        return 2
    return Supervisor(run_dir, spec).run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
