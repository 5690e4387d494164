"""`make run`'s promise: every service ready within 60 s, a process that dies is restarted, and Ctrl-C
leaves no process behind."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from libs.common.db.migrate import SERVICES
from libs.devkit.broker import free_port, free_ports
from tests.integration.support import Isolation, process_alive


def _children_of(pid: int) -> set[int]:
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.add(int(stat.parent.name))
    return found


def _env(isolation: Isolation, tmp_path: Path, base_port: int) -> dict[str, str]:
    env = {
        **os.environ,
        "GPUCLOUD_BASE_PORT": str(base_port),
        "GPUCLOUD_BROKER_PORT": str(free_port()),
        "GPUCLOUD_SCHEMA_PREFIX": f"t{isolation.token}_",
        "GPUCLOUD_RUN_DIR": str(tmp_path),
        "REDIS_PREFIX": isolation.redis_prefix,
        "DATABASE_URL": isolation.infra.database_url,
        "REDIS_URL": isolation.infra.redis_url,
    }
    env.pop("KAFKA_BOOTSTRAP_SERVERS", None)
    return env


def test_make_run_stack_is_ready_within_60s_and_ctrl_c_leaves_no_process(
    isolation: Isolation, tmp_path: Path
) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "libs.devkit.devstack", "--ready-timeout", "60"],
        env=_env(isolation, tmp_path, free_ports(len(SERVICES) + 1) + 1),  # the gateway on base - 1
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    started = time.monotonic()
    output = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            output.append(line)
            if "gpucloud is up" in line or proc.poll() is not None:
                break
        took = time.monotonic() - started
        banner = "".join(output)
        assert "gpucloud is up" in banner, banner
        assert took < 60 + 30  # 60 s of readiness plus migrations and interpreter start
        assert float(re.search(r"after ([0-9.]+)s", banner).group(1)) < 60  # type: ignore[union-attr]
        children = _children_of(proc.pid)
        assert len(children) >= 7  # six services and the broker
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=40) == 0
        deadline = time.monotonic() + 5
        while any(process_alive(p) for p in children) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [p for p in children if process_alive(p)]
    finally:
        if proc.poll() is None:
            proc.kill()


#: A test runner in miniature: starts the stack as RunningStack does and then waits, to be killed.
_STARTER = """
import subprocess, sys, time
log = open(sys.argv[1], "wb")
args = [sys.executable, "-m", "libs.devkit.devstack", "--ready-timeout", "60", "--stop-with-parent"]
proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
print(proc.pid, flush=True)
time.sleep(600)
"""


def test_a_stack_started_to_stop_with_its_parent_ends_when_the_parent_is_killed(
    isolation: Isolation, tmp_path: Path
) -> None:
    log = tmp_path / "devstack.log"
    starter = subprocess.Popen(
        [sys.executable, "-c", _STARTER, str(log)],
        env=_env(isolation, tmp_path, free_ports(len(SERVICES) + 1) + 1),
        stdout=subprocess.PIPE,
        text=True,
    )
    stack = 0
    try:
        assert starter.stdout is not None
        stack = int(starter.stdout.readline())
        deadline = time.monotonic() + 120
        while "gpucloud is up" not in (log.read_text() if log.exists() else ""):
            assert time.monotonic() < deadline, log.read_text()
            assert process_alive(stack), log.read_text()
            time.sleep(0.3)
        children = _children_of(stack)
        assert len(children) >= 7  # six services and the broker
        starter.kill()  # SIGKILL: nothing of the parent's own runs to stop the stack
        starter.wait(timeout=10)
        deadline = time.monotonic() + 45
        while any(process_alive(p) for p in {stack, *children}) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not [p for p in {stack, *children} if process_alive(p)], log.read_text()[-3000:]
        assert "has ended" in log.read_text()
    finally:
        if starter.poll() is None:
            starter.kill()
        if stack and process_alive(stack):
            os.kill(stack, signal.SIGKILL)


class _Lines:
    """The stack's console, read by a thread so that a test can wait for a line with a deadline."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.seen: list[str] = []
        self._queue: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, args=(proc,), daemon=True).start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self._queue.put(line)

    def wait_for(self, pattern: str, *, timeout: float) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = next((m for line in self.seen if (m := re.search(pattern, line))), None)
            if found:
                return found
            try:
                self.seen.append(self._queue.get(timeout=max(0.01, deadline - time.monotonic())))
            except queue.Empty:
                break
        raise AssertionError(f"no line matching {pattern!r} within {timeout}s:\n{''.join(self.seen)}")


def _child_running(parent: int, module: str) -> int | None:
    for pid in _children_of(parent):
        try:
            if module.encode() in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"):
                return pid
        except OSError:
            continue
    return None


def test_make_run_restarts_a_service_killed_with_sigkill_and_says_so(
    isolation: Isolation, tmp_path: Path
) -> None:
    base_port = free_ports(len(SERVICES) + 1) + 1  # the gateway listens on base - 1
    proc = subprocess.Popen(
        [sys.executable, "-m", "libs.devkit.devstack", "--ready-timeout", "60", "--no-agent"],
        env=_env(isolation, tmp_path, base_port),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines = _Lines(proc)
    try:
        lines.wait_for("gpucloud is up", timeout=90)
        killed = _child_running(proc.pid, "services.scheduler")
        assert killed is not None
        os.kill(killed, signal.SIGKILL)
        lines.wait_for(r"scheduler exited with code -9; restarting in 0\.5s \(restart 1\)", timeout=10)
        lines.wait_for(r"scheduler started again \(restart 1\)", timeout=10)
        lines.wait_for(r"scheduler is ready again \(restart 1\)", timeout=60)
        readyz = httpx.get(f"http://127.0.0.1:{base_port + SERVICES.index('scheduler')}/readyz", timeout=5)
        assert readyz.status_code == 200, readyz.text
        restarted = _child_running(proc.pid, "services.scheduler")
        assert restarted not in (None, killed)
        assert proc.poll() is None  # the rest of the suite kept running
        children = _children_of(proc.pid)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=40) == 0
        deadline = time.monotonic() + 5
        while any(process_alive(p) for p in children) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [p for p in children if process_alive(p)]  # the restarted one stopped too
    finally:
        if proc.poll() is None:
            proc.kill()
