"""Helpers of the runner tests (process and podman): poll a runner until its reports say enough; kill
whatever a test left running."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from services.telemetry.adapters.runner import files
from services.telemetry.adapters.runner.process import ProcessRunner
from services.telemetry.adapters.runner.report import RunnerReport

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def until_reported(
    runner: ProcessRunner, done: Callable[[list[RunnerReport]], bool], *, timeout: float
) -> list[RunnerReport]:
    """Poll (and acknowledge) until done(all reports so far) holds; the reports."""
    seen: list[RunnerReport] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        seen.extend(runner.poll(now=NOW))
        runner.delivered()
        if done(seen):
            return seen
        time.sleep(0.05)
    raise AssertionError(f"not done within {timeout}s; reports: {seen}")


def kill_runs(root: Path) -> None:
    """SIGKILL the process group of every workload and supervisor still alive under ``root``."""
    for run in root.glob("*"):
        for name in (files.STARTED, files.SUPERVISOR):
            doc = files.read_json(run / name)
            if doc is not None and files.process_start(int(doc["pid"])) == doc.get("start"):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(int(doc["pid"]), signal.SIGKILL)
