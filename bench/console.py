"""The console: first load, and the GPUs page with 64 GPUs live at 1 Hz (issue 19's benchmark).

Real: `make run`'s stack (embedded broker, six services, node agent with the simulated 128-GPU fleet, the
gateway serving the built console), Debian's Chromium driven by playwright-core, all on loopback. A tenant
holds 64 GPUs (six 8-GPU H100 instances and sixteen single L4s); console/e2e/bench.mjs signs in as it,
opens the GPUs page, records Chromium's trace of it for the window (every main-thread task between two
updates is charged to the first: handler, style, layout, paint, GC) beside the page's own performance
measure of the handler, and reads the gateway's /metrics. The stack
runs niced (BENCH_STACK_NICE, 10): a user's browser does not share its cores with the servers, and on a
2-core host an unniced stack is what the browser's figures would measure. Prints one JSON line per figure.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


from bench.common import BenchEnv, emit, log
from libs.common.db.migrate import SERVICES
from libs.devkit.running import Operator, RunningStack, wait_for

BENCH = "console"
#: The stack runs at this lower CPU priority, so the browser's main thread is measured as on a user's
#: machine (where the browser does not share its cores with the servers); 0 to share them equally.
STACK_NICE = int(os.environ.get("BENCH_STACK_NICE", "10"))
CONSOLE = Path(__file__).resolve().parents[1] / "console"
#: 64 GPUs of the default fleet: its six H100 nodes whole, and sixteen single L4s.
SHAPES = (("H100-80GB-SXM", 8),) * 6 + (("L4", 1),) * 16
NETWORK = {"vpc_id": "vpc-bench1", "subnet_id": "subnet-bench1", "security_group_id": "sg-default"}


def instances(operator: Operator, key: str) -> None:
    """The instances of ``SHAPES``, running."""
    ids = []
    for model, count in SHAPES:
        body = {
            "kind": "instance",
            "image": {"name": "pytorch", "version": "2.3"},
            "urgency": 0.5,
            "resources": {
                "kind": "gpu",
                "model": model,
                "count": count,
            },
            "network": NETWORK,
            "tags": {"project": "bench", "team": "console"},
        }
        ids.append(operator.ok("POST", "scheduler", "/v1/workloads", key, json=body)["workload_id"])

    def states() -> list[str]:
        found = [operator.ok("GET", "scheduler", f"/v1/workloads/{w}", key) for w in ids]
        return [f"{w['state']} ({w['wait_reason'] or w['reason'] or '-'})" for w in found]

    try:
        wait_for(
            lambda: all(s.startswith("running") for s in states()), timeout=120, what="the instances to run"
        )
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {states()}") from None


def main() -> int:
    missing = [tool for tool in ("node", "chromium") if not shutil.which(tool)]
    if missing or not (CONSOLE / "dist" / "index.html").exists():
        log(f"skipped: missing {missing or 'console/dist (make install builds it)'}")
        return 1
    env = BenchEnv.create()
    overrides = {
        "GPUCLOUD_SCHEMA_PREFIX": f"bench{env.token}_",
        "REDIS_PREFIX": env.redis_prefix,
        "DATABASE_URL": env.database_url,
        "REDIS_URL": env.redis_url,
    }
    try:
        with (
            tempfile.TemporaryDirectory() as tmp,
            RunningStack(
                run_dir=Path(tmp), env=overrides, admin_key=f"bench-admin-{env.token}", nice=STACK_NICE
            ) as stack,
        ):
            operator = Operator(stack)
            operator.fleet_ready(gpus=128)
            key = operator.tenant("bench-console", shares=1, gpus=64, workloads=len(SHAPES))
            log(f"64 GPUs for the tenant: {len(SHAPES)} instances")
            instances(operator, key)
            fixture = {"gateway": stack.gateway, "services": stack.services, "admin_key": stack.admin_key}
            fixture["tenants"] = {"bench-console": key}
            done = subprocess.run(
                ["node", "e2e/bench.mjs"],
                cwd=CONSOLE,
                env={**os.environ, "E2E": json.dumps(fixture)},
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
            sys.stderr.write(done.stderr[-3000:])
            for line in done.stdout.splitlines():
                if line.startswith("{"):
                    print(line, flush=True)
            if done.returncode != 0:
                emit(BENCH, "failed", done.returncode, "exit status")
                return 1
    finally:
        asyncio.run(env.drop(*SERVICES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
