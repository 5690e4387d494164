"""Asking a workload to checkpoint before a move: the supervisor's side (docs/executors.md, "Migration").

Standard library only: the supervisor imports it. The run spec's ``checkpoint`` names a signal (sent to
the workload's process group) or a command (run in the workload's environment and working directory).
The checkpoint is complete when ``$GPUCLOUD_CHECKPOINT_DIR/COMPLETE`` exists, or the command exited 0,
within ``timeout_s``; it failed when the command exited otherwise, the workload ended without the marker,
or the time ran out. Either way the move goes on (SIGTERM, grace, SIGKILL); the result is kept in
exit.json for the agent, which uploads a complete checkpoint and tells the target either way.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["COMPLETE", "Checkpointing", "Result", "wanted"]

COMPLETE = "COMPLETE"  # what a workload creates in its checkpoint directory once the checkpoint is whole
DEFAULT_TIMEOUT_S = 60.0
LOG = "checkpoint.log"  # a checkpoint command's stdout and stderr, in the run directory


@dataclass(frozen=True, slots=True)
class Result:
    """How a checkpoint request ended."""

    complete: bool
    why: str = ""
    took_s: float = 0.0

    def doc(self) -> dict[str, Any]:
        return {"complete": self.complete, "why": self.why, "took_s": round(self.took_s, 3)}


def wanted(spec: Mapping[str, Any], stop: Mapping[str, Any]) -> dict[str, Any] | None:
    """The run's checkpoint request, when this stop is a move that asks for one (stop.json says so)."""
    run = spec.get("run") or {}
    ask = run.get("checkpoint") if isinstance(run, dict) else None
    if stop.get("reason") != "moved" or not stop.get("checkpoint") or not isinstance(ask, dict):
        return None
    return ask


class Checkpointing:
    """One checkpoint request under way, advanced by ``poll`` until it has a result."""

    def __init__(
        self,
        ask: Mapping[str, Any],
        *,
        checkpoint_dir: Path,
        run_dir: Path,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ask = ask
        self._dir = checkpoint_dir
        self._run_dir = run_dir
        self._clock = clock
        self._began = clock()
        timeout = ask.get("timeout_s")
        self._until = self._began + (
            float(timeout) if isinstance(timeout, int | float) else DEFAULT_TIMEOUT_S
        )
        self._command: subprocess.Popen[bytes] | None = None
        self.result: Result | None = None

    def begin(self, *, send: Callable[[signal.Signals], None], env: Mapping[str, str], cwd: str) -> None:
        """Deliver the request: a stale marker goes first, then the signal (through ``send``: to the
        workload's process group, or its container) or the command."""
        with contextlib.suppress(FileNotFoundError):
            (self._dir / COMPLETE).unlink()
        name, command = self._ask.get("signal"), self._ask.get("command")
        if isinstance(name, str) and name:
            self._signal(name, send=send)
        elif isinstance(command, list) and command:
            self._run([str(c) for c in command], env=env, cwd=cwd)
        else:
            self._end(False, "the run spec's checkpoint names neither a signal nor a command")

    def _signal(self, name: str, *, send: Callable[[signal.Signals], None]) -> None:
        sig = getattr(signal, name, None)
        if not isinstance(sig, signal.Signals) or sig in (signal.SIGKILL, signal.SIGSTOP):
            self._end(False, f"{name!r} is not a signal a workload can catch")
            return
        send(sig)

    def _run(self, argv: list[str], *, env: Mapping[str, str], cwd: str) -> None:
        try:
            with open(self._run_dir / LOG, "ab") as out:
                self._command = subprocess.Popen(  # noqa: S603 - the tenant's own checkpoint command
                    argv,
                    env=dict(env),
                    cwd=cwd,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=out,
                    process_group=0,
                    close_fds=True,
                )
        except OSError as exc:
            self._end(False, f"could not start the checkpoint command {argv[0]!r}: {exc.strerror or exc}")

    def poll(self, *, workload_alive: bool = True) -> Result | None:
        """The result once there is one: the marker, the command's exit, the workload's end or the time."""
        if self.result is not None:
            return self.result
        if self._command is not None and (code := self._command.poll()) is not None:
            self._command = None
            if code == 0:
                return self._end(True)
            return self._end(False, f"the checkpoint command exited with {code}")
        if self._command is None and (self._dir / COMPLETE).exists():
            return self._end(True)
        if not workload_alive and self._command is None:
            return self._end(False, f"the workload ended without creating {COMPLETE}")
        if self._clock() >= self._until:
            self._kill_command()
            return self._end(False, f"no checkpoint within {self._until - self._began:g}s")
        return None

    def _kill_command(self) -> None:
        if self._command is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._command.pid, signal.SIGKILL)
            self._command.wait()
            self._command = None

    def _end(self, complete: bool, why: str = "") -> Result:
        self.result = Result(complete=complete, why=why, took_s=self._clock() - self._began)
        return self.result
