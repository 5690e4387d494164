"""CPU and memory limits through a cgroup v2 child group, where the host lets the agent make one.

Standard library only (the supervisor uses it). On cgroup v2 the supervisor creates
``<root>/<run dir name>``, enables the memory and cpu controllers in ``<root>`` if they are not yet,
writes ``memory.max`` (and ``memory.swap.max`` 0, so the limit is not dodged into swap) and
``cpu.max``, and moves the workload into it before exec. ``<root>`` is the configured root, else the
cgroup the supervisor itself is in. The kernel refuses controllers in a group that holds processes
(other than the host's root group), so under systemd give the agent a delegated, empty subgroup. On
cgroup v1 only, or without write access, nothing is enforced and the reason is recorded.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CPU_PERIOD_US", "Cgroup", "cgroup2_mount", "own_cgroup", "prepare"]

CPU_PERIOD_US = 100_000


@dataclass(frozen=True, slots=True)
class Cgroup:
    """A workload's cgroup v2 group."""

    path: Path

    def join(self) -> None:
        """Move the calling process in (the child calls it between fork and exec)."""
        with open(self.path / "cgroup.procs", "w") as out:
            out.write(str(os.getpid()))

    def oom_kills(self) -> int:
        """How many processes of the group the OOM killer killed (memory.events oom_kill)."""
        with contextlib.suppress(OSError, ValueError):
            for line in (self.path / "memory.events").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        return 0

    def remove(self) -> None:
        """Remove the group once it is empty (its processes take a moment to be reaped)."""
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.02)


def cgroup2_mount(mountinfo: str) -> Path | None:
    """Where the cgroup v2 hierarchy is mounted, from /proc/self/mountinfo's text."""
    for line in mountinfo.splitlines():
        left, _, right = line.partition(" - ")
        if right.split(" ", 1)[0] == "cgroup2":
            return Path(left.split()[4])
    return None


def own_cgroup(proc_cgroup: str) -> str | None:
    """This process's cgroup v2 path ("0::/path" in /proc/self/cgroup), or None on v1 only."""
    for line in proc_cgroup.splitlines():
        if line.startswith("0::"):
            return line[3:].strip() or "/"
    return None


def prepare(
    *, name: str, root: Path | None, memory_bytes: int | None, cpu_millis: int | None
) -> tuple[Cgroup | None, str]:
    """The workload's group with its limits written, and a line saying what is enforced (or why not)."""
    if memory_bytes is None and cpu_millis is None:
        return None, "no CPU or memory limit asked"
    try:
        base = root if root is not None else _own_group()
        controllers = _enable(base, memory=memory_bytes is not None, cpu=cpu_millis is not None)
        group = Cgroup(base / name)
        group.path.mkdir(exist_ok=True)
        enforced = _limit(group, memory_bytes=memory_bytes, cpu_millis=cpu_millis, controllers=controllers)
    except _NoCgroup as exc:
        return None, f"limits not enforced: {exc}"
    except OSError as exc:
        return None, f"limits not enforced: cgroup v2 refused ({exc.strerror or exc}: {exc.filename or ''})"
    return group, f"cgroup v2 {group.path}: {enforced}"


class _NoCgroup(Exception):
    pass


def _own_group() -> Path:
    mount = cgroup2_mount(Path("/proc/self/mountinfo").read_text())
    own = own_cgroup(Path("/proc/self/cgroup").read_text())
    if mount is None or own is None:
        raise _NoCgroup("no cgroup v2 hierarchy here (cgroup v1 limits are not implemented)")
    base = mount / own.lstrip("/")
    if not (base / "cgroup.controllers").exists():
        raise _NoCgroup(f"the agent's cgroup {base} is not visible here")
    return base


def _enable(base: Path, *, memory: bool, cpu: bool) -> set[str]:
    """Enable the controllers asked for in base's children; those that are available."""
    available = set((base / "cgroup.controllers").read_text().split())
    wanted = {c for c, on in (("memory", memory), ("cpu", cpu)) if on and c in available}
    if not wanted:
        raise _NoCgroup(f"cgroup v2 {base} offers neither memory nor cpu (delegate them to the agent)")
    active = set((base / "cgroup.subtree_control").read_text().split())
    missing = wanted - active
    if missing:
        try:
            (base / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in sorted(missing)))
        except OSError as exc:
            raise _NoCgroup(
                f"cannot enable {', '.join(sorted(missing))} in {base} ({exc.strerror}): a group that holds "
                "processes cannot; set TELEMETRY_AGENT_CGROUP_ROOT to an empty delegated group"
            ) from exc
    return wanted


def _limit(group: Cgroup, *, memory_bytes: int | None, cpu_millis: int | None, controllers: set[str]) -> str:
    said = []
    if memory_bytes is not None:
        if "memory" in controllers:
            (group.path / "memory.max").write_text(str(memory_bytes))
            with contextlib.suppress(OSError):  # no swap accounting on this kernel: nothing to dodge into
                (group.path / "memory.swap.max").write_text("0")
            said.append(f"memory.max {memory_bytes}")
        else:
            said.append("memory not limited (no memory controller)")
    if cpu_millis is not None:
        if "cpu" in controllers:
            (group.path / "cpu.max").write_text(f"{cpu_millis * CPU_PERIOD_US // 1000} {CPU_PERIOD_US}")
            said.append(f"cpu.max {cpu_millis}m")
        else:
            said.append("CPU not limited (no cpu controller)")
    return ", ".join(said)
