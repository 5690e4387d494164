"""The embedded broker never outlives the process that started it, even one killed by SIGKILL."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from tests.integration.support import process_alive

_START = (
    "from libs.devkit.broker import EmbeddedBroker; b = EmbeddedBroker().start(); "
    "print(b._proc.pid, flush=True); import time; time.sleep(120)"
)


def test_embedded_broker_dies_when_its_parent_is_killed() -> None:
    parent = subprocess.Popen([sys.executable, "-c", _START], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    broker_pid = int(parent.stdout.readline())
    assert process_alive(broker_pid)
    parent.send_signal(signal.SIGKILL)
    parent.wait(timeout=10)
    deadline = time.monotonic() + 10
    while process_alive(broker_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not process_alive(broker_pid)
