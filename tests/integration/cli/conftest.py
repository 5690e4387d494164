"""One suite for the whole module (the real services, broker, Postgres, Redis) and the real gpuctl binary.

The suite starts once per module, as tests/integration/flows/suite.py starts it (its fleet, timings and
environment), because the CLI's tests only read and write through the public APIs: each test keeps to
its own workloads, so sharing the processes keeps the module well under three minutes.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from libs.common.redis import Keyspace, create_redis
from libs.common.settings import DEV_ADMIN_KEY
from libs.devkit.broker import free_ports
from libs.devkit.devstack import Stack
from libs.devkit.running import KEY_PROBES, wait_for
from tests.integration.flows.suite import FLEET, SERVICES, suite_env
from tests.integration.support import Infra, Isolation

T = TypeVar("T")
GPUCTL = Path(sys.executable).with_name("gpuctl")
NETWORK = ("--vpc", "vpc-main1", "--subnet", "subnet-a001", "--sg", "sg-default")


def until(probe: Callable[[], T | None], *, timeout: float, what: str, interval: float = 0.3) -> T:
    """Poll ``probe`` until it answers something truthy; fail after ``timeout`` seconds."""
    return wait_for(probe, timeout=timeout, what=what, every=interval)


@dataclass
class CliSuite:
    """The running suite and a way to run ``gpuctl`` against it with a config dir of this module."""

    stack: Stack
    config_home: Path

    @property
    def base_port(self) -> int:
        return self.stack.base_port

    def gpuctl(
        self, *args: str, key: str | None = None, stdin: str | None = None, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        """Run the installed binary; ``key`` goes in GPUCTL_API_KEY (else the context's key is used)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCTL_")}
        env |= {"XDG_CONFIG_HOME": str(self.config_home), "COLUMNS": "100"}
        if key is not None:
            env["GPUCTL_API_KEY"] = key
        return subprocess.run(
            [str(GPUCTL), *args],
            env=env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def ok(self, *args: str, key: str | None = None, timeout: float = 60) -> str:
        """Run gpuctl, require exit 0, return stdout."""
        done = self.gpuctl(*args, key=key, timeout=timeout)
        assert done.returncode == 0, f"gpuctl {' '.join(args)} -> {done.returncode}\n{done.stderr}"
        return done.stdout

    def json(self, *args: str, key: str | None = None, timeout: float = 60) -> Any:
        """Run a read with ``-o json`` and parse it."""
        return json.loads(self.ok(*args, "-o", "json", key=key, timeout=timeout))

    def fails(self, *args: str, code: int) -> str:
        """Run gpuctl, require exit ``code``, return stderr."""
        done = self.gpuctl(*args)
        assert done.returncode == code, (
            f"gpuctl {' '.join(args)} -> {done.returncode}, not {code}\n{done.stderr}"
        )
        return done.stderr

    def key_works_everywhere(self, key: str) -> None:
        """Until a new tenant key authenticates on all six services (replicated by platform.tenants)."""
        for service, path in KEY_PROBES.items():
            url = self.stack.url(service) + path

            def works(url: str = url) -> bool:
                try:
                    return httpx.get(url, headers={"X-API-Key": key}, timeout=5).status_code != 401
                except httpx.HTTPError:
                    return False

            until(works, timeout=30, what=f"key replicated to {service}")


def _clean(iso: Isolation) -> None:
    async def run() -> None:
        await iso.drop_schemas()
        client = create_redis(iso.infra.redis_url)
        try:
            await Keyspace(iso.redis_prefix).clear(client)
        finally:
            await client.aclose()

    asyncio.run(run())


@pytest.fixture(scope="module")
def cli_suite(infra: Infra, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CliSuite]:
    """The six services and the agent on free ports, and an admin context logged in through gpuctl."""
    assert GPUCTL.exists(), f"{GPUCTL} is missing: run make install (pyproject's [project.scripts])"
    iso, tmp = Isolation(infra=infra), tmp_path_factory.mktemp("cli")
    fleet, logs = tmp / "fleet.yaml", tmp / "logs"
    fleet.write_text(FLEET)
    logs.mkdir()
    stack = Stack(env=suite_env(iso, fleet), logs=logs, base_port=free_ports(len(SERVICES)))
    try:
        stack.migrate()
        stack.start()
        not_ready = stack.wait_ready(timeout_s=90)
        assert not not_ready, f"not ready: {not_ready}"
        suite = CliSuite(stack=stack, config_home=tmp / "config")
        suite.ok("login", "--base-port", str(stack.base_port), "--key", DEV_ADMIN_KEY, "--context", "admin")
        yield suite
    finally:
        stack.stop()
        _clean(iso)


@dataclass(frozen=True)
class Tenant:
    """A tenant created through ``gpuctl admin tenants create``, with its key."""

    tenant_id: str
    key: str


@pytest.fixture(scope="module")
def acme(cli_suite: CliSuite) -> Tenant:
    """Tenant acme, created with gpuctl, its key working on every service and stored as context 'acme'."""
    created = cli_suite.json("admin", "tenants", "create", "acme", "--name", "Acme ML", "--context", "admin")
    key = created["key"]["api_key"]
    cli_suite.key_works_everywhere(key)
    port = str(cli_suite.base_port)
    cli_suite.ok("login", "--base-port", port, "--key", key, "--tenant", "acme", "--context", "acme")
    return Tenant("acme", key)
