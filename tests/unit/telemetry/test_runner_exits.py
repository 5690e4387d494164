"""How the supervisor names a workload's end, and where it finds cgroup v2."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from services.telemetry.adapters.runner.cgroups import cgroup2_mount, own_cgroup
from services.telemetry.adapters.runner.exits import ExitReason, StopReason, describe, exit_reason


@pytest.mark.parametrize(
    ("code", "sig", "stop", "time_limit", "oom", "expected"),
    [
        (0, None, None, False, 0, "succeeded"),
        (3, None, None, False, 0, "failed"),
        (None, 9, None, False, 0, "failed"),  # a SIGKILL nobody can tell from the OOM killer
        (None, 9, None, False, 1, "oom_killed"),
        (137, None, None, False, 1, "oom_killed"),  # a shell reporting its child's OOM kill
        (None, 15, None, True, 0, "time_limit"),
        (0, None, None, True, 0, "time_limit"),  # it exited cleanly on the SIGTERM of its limit
        (None, 15, "cancelled", False, 0, "cancelled"),
        (0, None, "cancelled", False, 0, "cancelled"),
        (None, 9, "preempted", True, 1, "preempted"),  # the agent's stop says why, first
        (None, 15, "moved", False, 0, "cancelled"),
    ],
)
def test_the_exit_reason_puts_a_requested_stop_first_then_the_limit_then_oom_then_the_code(
    code: int | None,
    sig: int | None,
    stop: StopReason | None,
    time_limit: bool,
    oom: int,
    expected: ExitReason,
) -> None:
    got = exit_reason(exit_code=code, signal=sig, stop_reason=stop, time_limit=time_limit, oom_kills=oom)
    assert got == expected


def test_the_exit_is_described_for_people() -> None:
    assert describe(exit_code=3, signal=None, reason="failed", killed=False) == "exit code 3"
    assert describe(exit_code=None, signal=signal.SIGKILL, reason="cancelled", killed=True) == (
        "cancelled: killed by SIGKILL after SIGTERM and the grace"
    )
    assert (
        describe(exit_code=None, signal=15, reason="time_limit", killed=False)
        == "time limit: ended by SIGTERM"
    )


def test_cgroup_v2_is_found_in_mountinfo_and_in_the_process_cgroup_file() -> None:
    mountinfo = (
        "30 24 0:26 / /sys/fs/cgroup/memory rw,relatime shared:12 - cgroup cgroup rw,memory\n"
        "35 24 0:31 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw\n"
    )
    assert cgroup2_mount(mountinfo) == Path("/sys/fs/cgroup/unified")
    assert cgroup2_mount(mountinfo.splitlines()[0]) is None
    assert own_cgroup("4:memory:/x\n0::/system.slice/agent.service\n") == "/system.slice/agent.service"
    assert own_cgroup("0::/\n") == "/"
    assert own_cgroup("4:memory:/x\n") is None
