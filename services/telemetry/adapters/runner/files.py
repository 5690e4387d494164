"""A workload's state directory: the files the agent and the workload's supervisor share.

Standard library only: the supervisor imports it, and it starts for every workload. Each file is JSON
written to a temporary name in the same directory and renamed over the final one, so a reader (the
agent, after a crash of either side) sees a whole file or none.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

__all__ = [
    "CHECKPOINT_DIR",
    "EXIT",
    "LOG",
    "OUTPUT_DIR",
    "REPORTED",
    "SPEC",
    "STARTED",
    "STOP",
    "SUPERVISOR",
    "process_start",
    "read_json",
    "run_dir_name",
    "write_json",
]

SPEC = "spec.json"  # written by the agent before the supervisor starts: what to run and how
SUPERVISOR = "supervisor.json"  # the supervisor's pid and start time, written by itself first thing
CLAIM = "supervisor.claim"  # made (O_EXCL) by the one supervisor of a run, before supervisor.json
STARTED = "started.json"  # the workload's pid and start time, once it was exec'd
STOP = "stop.json"  # the agent's request to stop it: reason and grace
EXIT = "exit.json"  # how it ended
REPORTED = "reported.json"  # what the agent has reported and had acknowledged (never reported twice)
LOG = "output.log"  # stdout and stderr together; output.log.1 is the older half under the quota
OUTPUT_DIR = "outputs"
CHECKPOINT_DIR = "checkpoints"

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def run_dir_name(*, workload_id: str, placement_id: str) -> str:
    """One directory per placement: readable (the workload id) and unique (a digest of both ids)."""
    digest = hashlib.sha256(f"{workload_id}\n{placement_id}".encode()).hexdigest()[:16]
    return f"{_UNSAFE.sub('_', workload_id)[:48]}-{digest}"


def write_json(path: Path, doc: dict[str, Any], *, durable: bool = True) -> None:
    """Replace path with doc: readers see the old file or the new one, never a partial one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as out:
        json.dump(doc, out, separators=(",", ":"))
        if durable:
            out.flush()
            os.fsync(out.fileno())
    os.replace(tmp, path)


def claim(run_dir: Path) -> bool:
    """Take the run's claim (CLAIM, made exclusively): True for the one taker. The supervisor takes it
    before it runs anything, and the agent before it records a run whose supervisor never came up as
    failed, so a late supervisor and that record never both happen."""
    try:
        os.close(os.open(run_dir / CLAIM, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        return False
    return True


def read_json(path: Path) -> dict[str, Any] | None:
    """The JSON object at path; None when there is none (or not a whole one: writes are atomic)."""
    try:
        doc = json.loads(path.read_bytes())
    except (FileNotFoundError, NotADirectoryError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def process_start(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (/proc/<pid>/stat); None when it is gone or a
    zombie. With the pid it names one process: a pid reused by another process starts at another time."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2 :].split()  # the name may hold spaces and parentheses
        if fields[0] in ("Z", "X"):
            return None
        return int(fields[19])
    return None
