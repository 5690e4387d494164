"""A fork server for supervisors: one launcher process per runner, a fork of it per workload.

A fresh ``python -m ...supervise`` cost ~70 ms of CPU on a small host (the interpreter, then the
imports), most of the 100 ms placed-to-running budget, and 35 s of CPU for 500 starts at once. The
launcher imports the supervisor module once; each workload's supervisor is a fork of it (~2 ms), in a
session of its own as before (it outlives the agent and the launcher, and no terminal's signals reach
it), with stdin and stdout on /dev/null, stderr into the run's ``supervisor.log``, and the run directory
as its working directory.

The agent writes one run directory per line to the launcher's stdin. The launcher reaps the
supervisors that end while it lives, and ends itself when the agent's end of the pipe closes (the agent
stopped or died); supervisors still running then carry on, as any orphan does. The agent watches them
by their supervisor.json (pid and start time), as it does runs it adopted. A launcher killed just after
it was given a line may take the line with it: the runs given to a launcher that died, whose supervisor
never claimed its run, are given again (``Launcher.lost``). When the launcher cannot be used, the runner
starts a supervisor directly (``Launcher.launch`` says False).

Standard library only: ``main`` runs in the launcher, the rest in the agent.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO

__all__ = ["Launcher", "main"]

SUPERVISOR_LOG = "supervisor.log"
_EXIT_CRASHED = 70  # EX_SOFTWARE: the supervisor raised


class Launcher:
    """The agent's end of a launcher process: started at the first launch, again if it died."""

    def __init__(self, *, python: str, module: str, env: dict[str, str], log_path: Path) -> None:
        self._argv = [python, "-S", "-c", _BOOT, module]
        self._env = env
        self._log_path = log_path
        self._proc: subprocess.Popen[bytes] | None = None
        self._given: list[Path] = []  # run dirs written to the live launcher, not yet known forked
        self._lost: list[Path] = []  # those given to a launcher that died since
        self.started = 0  # launcher processes started (1 unless one died)

    def launch(self, run_dir: Path) -> bool:
        """Have a supervisor forked for run_dir; False when no launcher can take it (start one directly)."""
        line = str(run_dir)
        if "\n" in line:
            return False
        for _ in range(2):  # a launcher found dead is replaced once
            stdin = self._stdin()
            if stdin is None:
                return False
            try:
                stdin.write(f"{line}\n".encode())
                stdin.flush()
                self._given.append(run_dir)
                return True
            except OSError:  # it died since (BrokenPipeError): the line is lost with it
                self._forget()
        return False

    def lost(self, *, forked: Callable[[Path], bool]) -> list[Path]:
        """The run dirs whose line may have died unread with a launcher that died since (a pipe takes a
        write its reader never reads): give them again. ``forked`` says a run's supervisor came up (its
        line was read); a supervisor forked just before the launcher died, and so started twice, finds
        the run claimed the second time and ends (supervise.Supervisor.claim)."""
        self._given = [p for p in self._given if not forked(p)]
        if self._proc is not None and self._proc.poll() is not None:
            self._forget()
        out, self._lost = [p for p in self._lost if not forked(p)], []
        return out

    def close(self) -> None:
        """Close the pipe: the launcher ends (the supervisors it forked carry on)."""
        if self._proc is not None:
            self._forget()

    def _stdin(self) -> IO[bytes] | None:
        if self._proc is not None and self._proc.poll() is not None:
            self._forget()
        if self._proc is None:
            try:
                with open(self._log_path, "ab") as err:
                    self._proc = subprocess.Popen(  # noqa: S603 - our own module, by absolute interpreter path
                        self._argv,
                        env=self._env,
                        stdin=subprocess.PIPE,
                        stdout=subprocess.DEVNULL,
                        stderr=err,
                        start_new_session=True,
                        close_fds=True,
                    )
            except OSError:
                return None
            self.started += 1
        return self._proc.stdin

    def _forget(self) -> None:
        proc, self._proc = self._proc, None
        self._lost += self._given
        self._given = []
        if proc is not None and proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        if proc is not None:
            proc.poll()  # reaped if it is gone; a live one sees EOF and ends by itself


#: What the launcher's interpreter runs (python -S -c): the package is found through PYTHONPATH.
_BOOT = (
    "import sys; from services.telemetry.adapters.runner.launcher import main; sys.exit(main(sys.argv[1:]))"
)


def main(argv: list[str]) -> int:
    """The launcher: import the supervisor module argv[0], then fork one supervisor per line of stdin."""
    module = importlib.import_module(argv[0])
    signal.signal(signal.SIGCHLD, lambda *_: _reap())
    for raw in sys.stdin.buffer:
        run_dir = raw.decode(errors="replace").rstrip("\n")
        if run_dir and os.fork() == 0:
            _child(module.main, run_dir)
        _reap()
    return 0


def _reap() -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass


def _child(supervise: Callable[[list[str]], int], run_dir: str) -> None:
    """In the fork: become the run's supervisor, then exit without returning to the launcher's loop."""
    code = _EXIT_CRASHED
    try:
        os.setsid()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        null = os.open(os.devnull, os.O_RDWR)
        err = os.open(os.path.join(run_dir, SUPERVISOR_LOG), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        for fd, target in ((null, 0), (null, 1), (err, 2)):
            os.dup2(fd, target)
        os.close(null)
        os.close(err)
        os.chdir(run_dir)
        with contextlib.suppress(OSError), open("/proc/self/comm", "w") as comm:
            comm.write("gpucloud-superv")  # what ps and top show (its argv stays the launcher's)
        code = supervise([run_dir])
    except BaseException:  # whatever happened, this fork must not go on as the launcher
        with contextlib.suppress(BaseException):
            import traceback

            traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            sys.stderr.flush()
        os._exit(code)
