"""`make run`'s own entry point as a child process, and an operator's first calls against it.

The console's browser tests and its benchmark both need the whole suite as a user starts it (embedded
broker, six services, node agent with its simulated fleet, the gateway serving the built console), on
free ports and its own slice of PostgreSQL and Redis, then tenants with keys set up through the public
APIs. This is that, once.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import httpx

from libs.common.db.migrate import SERVICES
from libs.devkit.broker import free_port, free_ports

__all__ = ["Operator", "RunningStack", "wait_for"]

ROOT = Path(__file__).resolve().parents[2]
T = TypeVar("T")
#: One cheap tenant-scoped read per service: 200 once the service has learnt of a new key.
KEY_PROBES = {
    "inventory": "/v1/capacity",
    "scheduler": "/v1/workloads",
    "telemetry": "/v1/gpus/latest",
    "alerting": "/v1/alerts",
    "billing": "/v1/balances",
    "recovery": "/v1/incidents",
}


def wait_for(probe: Callable[[], T | None], *, timeout: float, what: str, every: float = 0.5) -> T:
    """The first truthy answer of ``probe`` within ``timeout`` seconds; AssertionError naming ``what``."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}")


class RunningStack:
    """``python -m libs.devkit.devstack`` on free ports; the gateway on the port below the services'."""

    def __init__(
        self,
        *,
        run_dir: Path,
        env: Mapping[str, str],
        admin_key: str,
        ready_timeout_s: float = 90,
        nice: int = 0,
    ) -> None:
        self.run_dir = run_dir
        self.base_port = free_ports(len(SERVICES) + 1) + 1
        self.admin_key = admin_key
        self.ready_timeout_s = ready_timeout_s
        self.env = {
            **os.environ,
            **env,
            "GPUCLOUD_BASE_PORT": str(self.base_port),
            "GPUCLOUD_BROKER_PORT": str(free_port()),
            "GPUCLOUD_RUN_DIR": str(run_dir),
            "ADMIN_API_KEY": admin_key,
        }
        self.env.pop("KAFKA_BOOTSTRAP_SERVERS", None)
        self.log_path = run_dir / "devstack.log"
        #: Lowered CPU priority of the whole stack (its children inherit it): a benchmark of the browser
        #: measures the browser, as on a user's machine, not the server sharing its cores.
        self.nice = nice
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def gateway(self) -> str:
        return f"http://127.0.0.1:{self.base_port - 1}"

    @property
    def services(self) -> dict[str, str]:
        return {s: f"http://127.0.0.1:{self.base_port + i}" for i, s in enumerate(SERVICES)}

    def log_tail(self, chars: int = 6000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:] if self.log_path.exists() else ""

    def __enter__(self) -> RunningStack:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("wb") as log:
            self._proc = subprocess.Popen(  # noqa: S603 - our own entry point, with our interpreter
                [
                    *(["nice", "-n", str(self.nice)] if self.nice else []),
                    sys.executable,
                    "-m",
                    "libs.devkit.devstack",
                    "--ready-timeout",
                    str(self.ready_timeout_s),
                    "--stop-with-parent",
                ],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
            )
        proc = self._proc
        wait_for(
            lambda: proc.poll() is not None or "gpucloud is up" in self.log_tail(chars=100_000),
            timeout=self.ready_timeout_s + 60,
            what="the stack to be up",
        )
        if proc.poll() is not None:
            raise RuntimeError(f"the stack ended with {proc.returncode}:\n{self.log_tail()}")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._proc is None:
            return
        self._proc.terminate()
        try:
            self._proc.wait(timeout=40)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


class Operator:
    """The public APIs on the services' own ports, with the admin key: what an operator sets up first."""

    def __init__(self, stack: RunningStack) -> None:
        self.http = httpx.Client(timeout=15.0)
        self.urls = stack.services
        self.admin = {"X-API-Key": stack.admin_key}

    def ok(self, method: str, service: str, path: str, key: str | None = None, **kw: Any) -> Any:
        """The JSON answer of a call that must succeed (with ``key``, else the admin key)."""
        headers = {"X-API-Key": key} if key else self.admin
        response = self.http.request(method, self.urls[service] + path, headers=headers, **kw)
        if response.status_code >= 400:
            raise AssertionError(f"{method} {service}{path} -> {response.status_code}: {response.text}")
        return response.json() if response.content else None

    def fleet_ready(self, *, gpus: int = 1, timeout: float = 60) -> None:
        """Until the node agent's simulated fleet has registered ``gpus`` healthy GPUs."""
        wait_for(
            lambda: len(self.ok("GET", "inventory", "/v1/gpus?health=healthy&limit=1000")) >= gpus,
            timeout=timeout,
            what=f"{gpus} healthy GPUs",
        )

    def tenant(
        self, tenant: str, *, shares: int, gpus: int, units: float | None = None, workloads: int = 10
    ) -> str:
        """A new tenant with its share and quota; its key, once every service accepts it."""
        created = self.ok(
            "POST", "scheduler", "/v1/admin/tenants", json={"tenant_id": tenant, "name": tenant}
        )
        key = str(created["key"]["api_key"])
        self.ok("PUT", "scheduler", f"/v1/admin/tenants/{tenant}/share", json={"shares": shares})
        # An H100 is about 18 compute units: 20 per GPU leaves room for any model.
        quota = {"gpus": gpus, "units": units if units is not None else gpus * 20, "workloads": workloads}
        self.ok("PUT", "scheduler", f"/v1/admin/tenants/{tenant}/quota", json=quota)
        for service, path in KEY_PROBES.items():  # keys reach the other services over the platform topic
            wait_for(
                functools.partial(self._accepts, service, path, key),
                timeout=30,
                what=f"{tenant}'s key to reach {service}",
                every=0.3,
            )
        return key

    def _accepts(self, service: str, path: str, key: str) -> bool:
        return self.http.get(self.urls[service] + path, headers={"X-API-Key": key}).status_code == 200
