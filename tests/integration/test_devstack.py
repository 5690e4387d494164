"""`make run`'s promise: every service ready within 60 s, and Ctrl-C leaves no process behind."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

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


def test_make_run_stack_is_ready_within_60s_and_ctrl_c_leaves_no_process(
    isolation: Isolation, tmp_path: Path
) -> None:
    env = {
        **os.environ,
        "GPUCLOUD_BASE_PORT": str(free_ports(len(SERVICES))),
        "GPUCLOUD_BROKER_PORT": str(free_port()),
        "GPUCLOUD_SCHEMA_PREFIX": f"t{isolation.token}_",
        "GPUCLOUD_RUN_DIR": str(tmp_path),
        "REDIS_PREFIX": isolation.redis_prefix,
        "DATABASE_URL": isolation.infra.database_url,
        "REDIS_URL": isolation.infra.redis_url,
    }
    env.pop("KAFKA_BOOTSTRAP_SERVERS", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "libs.devkit.devstack", "--ready-timeout", "60"],
        env=env,
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
