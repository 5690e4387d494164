"""python -m services.telemetry.adapters.runner.podman_supervise <run dir>: a container's supervisor.

The process runner's supervisor (supervise.py) around ``podman run``, attached: spec.json's argv is the
whole ``podman run`` command (podman.py builds it), so the container's stdout and stderr, and podman's
own errors, reach output.log under the same quota, and stop, grace and time limit work as for a process.
What differs: signals go to the container (``podman kill --signal``; to the podman client only before
the container exists, which aborts a pull), no cgroup is made here (podman enforces ``--memory`` and
``--cpus`` through its own), and the end is read from ``podman inspect`` (exit code, OOMKilled), then
the container is removed, then the end is written. Standard library only, as supervise.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from services.telemetry.adapters.runner import files
from services.telemetry.adapters.runner.supervise import LogFile, Supervisor

__all__ = ["CIDFILE", "PodmanSupervisor", "container_status", "main"]

CIDFILE = "container.id"  # podman run --cidfile: written once the container exists
PODMAN_TIMEOUT_S = 30.0  # one podman kill / inspect / rm; podman that hangs longer is broken
NO_CONTAINER = 125  # podman run's own failure (bad option, image not found): no container was made


def container_status(code: int | None) -> tuple[int | None, int | None]:
    """(exit code, signal) from a container's exit code: 128+n is signal n, as runtimes report a PID 1
    killed by a signal (and as the kernel's OOM killer's SIGKILL shows: 137)."""
    if code is not None and 128 < code <= 128 + 64:
        return None, code - 128
    return code, None


class PodmanSupervisor(Supervisor):
    """Runs one workload's container to its end."""

    def __init__(self, run_dir: Path, spec: dict[str, Any]) -> None:
        super().__init__(run_dir, spec)
        box = spec["container"]
        self._cmd = [str(a) for a in box["podman"]]  # the podman command and its global options
        self._name = str(box["name"])
        self._limits = str(box.get("limits") or "")

    def run(self) -> int:
        if not self.claim():
            return 0
        files.write_json(
            self._dir / files.SUPERVISOR, {"pid": os.getpid(), "start": files.process_start(os.getpid())}
        )
        self._signals()
        log = LogFile(self._dir / files.LOG, quota=int(self._spec.get("log_quota_bytes") or 1 << 26))
        try:
            self._supervise(None, limits=self._limits, log=log)
        finally:
            log.close()
            self._podman_ok("rm", "--force", "--ignore", "--time", "0", self._name)
        return 0

    def container_id(self) -> str | None:
        """The container's id once podman made it."""
        with contextlib.suppress(OSError):
            return (self._dir / CIDFILE).read_text().strip() or None
        return None

    def _signal(self, child: subprocess.Popen[bytes], sig: signal.Signals) -> None:  # type: ignore[override]
        cid = self.container_id()
        if cid is not None and self._podman_ok("kill", "--signal", str(int(sig)), cid):
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pid, sig)  # no container yet (a pull), or podman refused: the client itself

    def _exited(self, *, exit_code: int | None, sig: int | None, oom: int, detail: str) -> None:
        state = self._state()
        if state is None:
            if exit_code == NO_CONTAINER:
                detail = f"podman could not run the container (exit code {NO_CONTAINER}; see output.log)"
        elif state.get("Running"):
            self._podman_ok("rm", "--force", "--time", "0", self._name)
            detail = "the podman client ended while its container ran; the container was removed"
        else:
            code = state.get("ExitCode")
            exit_code, sig = container_status(code if isinstance(code, int) else exit_code)
            oom = 1 if state.get("OOMKilled") else 0
            # Read, so the container goes before the end is told: who sees exit.json sees no container.
            self._podman_ok("rm", "--force", "--ignore", "--time", "0", self._name)
        super()._exited(exit_code=exit_code, sig=sig, oom=oom, detail=detail)

    def _state(self) -> dict[str, Any] | None:
        """The container's State from ``podman inspect``; None when there is none."""
        cid = self.container_id()
        if cid is None:
            return None
        out = self._podman("inspect", "--format", "json", cid)
        with contextlib.suppress(ValueError, IndexError, KeyError, TypeError):
            state = json.loads(out or "")[0]["State"]
            return state if isinstance(state, dict) else None
        return None

    def _podman(self, *args: str) -> str | None:
        """stdout of one podman command; None when it failed (its stderr goes to supervisor.log)."""
        try:
            done = subprocess.run(  # noqa: S603 - podman, by the agent's configured command
                [*self._cmd, *args],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=PODMAN_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            print(f"podman {args[0]}: {exc}", file=sys.stderr)
            return None
        if done.returncode != 0:
            print(f"podman {args[0]}: {done.stderr.decode(errors='replace').strip()}", file=sys.stderr)
            return None
        return done.stdout.decode(errors="replace")

    def _podman_ok(self, *args: str) -> bool:
        return self._podman(*args) is not None


def main(argv: list[str]) -> int:
    """Supervise the container of the run directory argv[0]."""
    if len(argv) != 1:
        print(
            "usage: python -m services.telemetry.adapters.runner.podman_supervise <run dir>", file=sys.stderr
        )
        return 2
    run_dir = Path(argv[0])
    spec = files.read_json(run_dir / files.SPEC)
    if spec is None or not isinstance(spec.get("container"), dict):
        print(f"no readable container spec in {run_dir / files.SPEC}", file=sys.stderr)
        return 2
    return PodmanSupervisor(run_dir, spec).run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
