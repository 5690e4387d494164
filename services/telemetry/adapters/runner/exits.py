"""How a workload's end is told: the exit reason from what the supervisor saw (standard library only)."""

from __future__ import annotations

import signal as signals
from typing import Literal

__all__ = ["ExitReason", "StopReason", "describe", "exit_reason"]

ExitReason = Literal["succeeded", "failed", "oom_killed", "time_limit", "cancelled", "preempted"]
#: Why the agent stops a workload: the scheduler cancelled or preempted it, or it moves (a migration or a
#: new placement on this agent), whose end is no exit of the workload and is not reported.
StopReason = Literal["cancelled", "preempted", "moved"]


def exit_reason(
    *,
    exit_code: int | None,
    signal: int | None,
    stop_reason: StopReason | None,
    time_limit: bool,
    oom_kills: int,
) -> ExitReason:
    """Why it ended: a stop the agent asked for, then the time limit, then the OOM killer, then the code.

    ``oom_kills`` is how much the workload cgroup's memory.events oom_kill count rose (0 without a
    cgroup: a SIGKILL without one is only "failed", since nothing tells the OOM killer from a person).
    """
    if stop_reason == "preempted":
        return "preempted"
    if stop_reason is not None:
        return "cancelled"
    if time_limit:
        return "time_limit"
    if oom_kills > 0:
        return "oom_killed"
    return "succeeded" if exit_code == 0 and signal is None else "failed"


def describe(*, exit_code: int | None, signal: int | None, reason: ExitReason, killed: bool) -> str:
    """One line for people: how it ended and why."""
    if signal is not None:
        name = _signal_name(signal)
        how = f"killed by {name} after SIGTERM and the grace" if killed else f"ended by {name}"
    else:
        how = f"exit code {exit_code}"
    return how if reason in ("succeeded", "failed") else f"{reason.replace('_', ' ')}: {how}"


def _signal_name(number: int) -> str:
    try:
        return signals.Signals(number).name
    except ValueError:
        return f"signal {number}"
