"""The console in a real browser against the real stack: `make run`'s own entry point (embedded broker,
six services, node agent with its simulated fleet, the gateway serving the built console), seeded through
the public APIs, then driven by Playwright (playwright-core) in Debian's Chromium: console/e2e/*.test.mjs.

Skips, saying why, where Chromium, Node.js or the built console is missing (`make install` builds it,
`make chromium` installs the browser).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from libs.devkit.running import Operator, RunningStack
from tests.integration.support import Isolation

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CONSOLE = Path(__file__).resolve().parents[3] / "console"
#: The whole browser suite's bound: it is one test here, and make test must stay within its time.
E2E_TIMEOUT_S = 420
TENANTS = (("e2e-a", 2, 8), ("e2e-b", 1, 4))


def _missing() -> str | None:
    if not shutil.which("node"):
        return "node is not installed"
    if not shutil.which("chromium"):
        return "chromium is not installed (make chromium)"
    if not (CONSOLE / "dist" / "index.html").exists():
        return "the console is not built (make install builds it)"
    if not (CONSOLE / "node_modules" / "playwright-core").exists():
        return "console/node_modules lacks playwright-core (make install runs npm ci)"
    return None


def test_the_console_in_a_real_browser(isolation: Isolation, tmp_path: Path) -> None:
    missing = _missing()
    if missing:
        pytest.skip(missing)
    env = {
        "GPUCLOUD_SCHEMA_PREFIX": f"t{isolation.token}_",
        "REDIS_PREFIX": isolation.redis_prefix,
        "DATABASE_URL": isolation.infra.database_url,
        "REDIS_URL": isolation.infra.redis_url,
        "OBJECT_STORE_URL": isolation.object_store_url,
    }
    with RunningStack(run_dir=tmp_path / "run", env=env, admin_key=f"e2e-admin-{isolation.token}") as stack:
        operator = Operator(stack)
        operator.fleet_ready(gpus=64)
        keys = {tenant: operator.tenant(tenant, shares=shares, gpus=gpus) for tenant, shares, gpus in TENANTS}
        fixture = {
            "gateway": stack.gateway,
            "services": stack.services,
            "admin_key": stack.admin_key,
            "tenants": keys,
            "screenshots": os.environ.get("CONSOLE_SCREENSHOTS", str(tmp_path / "screens")),
        }
        try:
            done = subprocess.run(
                ["node", "--test", "--test-concurrency=1", "e2e/"],
                cwd=CONSOLE,
                env={**os.environ, "E2E": json.dumps(fixture)},
                capture_output=True,
                text=True,
                timeout=E2E_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired as exc:
            ran = f"{exc.stdout!r}\n{exc.stderr!r}"
            raise AssertionError(f"the browser suite ran past {E2E_TIMEOUT_S}s:\n{ran}") from exc
        report = f"{done.stdout}\n{done.stderr}"
        if done.returncode != 0:
            report += f"\n--- stack log ---\n{stack.log_tail()}"
        assert done.returncode == 0, report
        assert "# fail 0" in done.stdout, report
        assert "# pass 0" not in done.stdout, report  # some test ran
