"""One stack for the gateway's integration tests: the gateway process in front of inventory, the
scheduler, telemetry, alerting and recovery processes and the simulated agent, with two tenants whose
keys work everywhere, and tenant A's job running on one GPU under an alert rule that fires."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from libs.common.redis import Keyspace, create_redis
from libs.devkit.broker import free_ports
from libs.devkit.devstack import AGENT, GATEWAY, Stack
from libs.devkit.running import KEY_PROBES
from tests.integration.flows.journey import NETWORK
from tests.integration.flows.suite import SERVICES, suite_env
from tests.integration.support import ADMIN_HEADERS, Infra, Isolation

NEEDED = ("inventory", "scheduler", "telemetry", "alerting", "recovery")
FLEET = """
nodes:
  - hostname: gw-l4
    labels: {zone: z1, region: r1, pool: inference}
    gpus:
      - {model: L4, count: 2}
"""
HOT = {"name": "gw_hot", "metric": "gpu_temp_c", "comparator": ">", "threshold": 0, "for": "0s",
       "severity": "warning", "summary": "any temperature"}  # fmt: skip


@dataclass
class GatewayStack:
    """The running processes, the tenants' keys and tenant A's job and GPU."""

    stack: Stack
    iso: Isolation
    keys: dict[str, str]
    job: str
    gpu: str

    @property
    def url(self) -> str:
        return self.stack.url(GATEWAY)

    def tails(self) -> str:
        paths = [self.stack.logs / f"{n}.log" for n in (*NEEDED, GATEWAY, AGENT)]
        return "\n".join(
            f"--- {p.name}\n" + "\n".join(p.read_text().splitlines()[-25:]) for p in paths if p.exists()
        )


def _until(probe: Any, *, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = probe()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def _tenant(stack: Stack, tenant: str) -> str:
    made = httpx.post(
        f"{stack.url('scheduler')}/v1/admin/tenants",
        json={"tenant_id": tenant, "name": tenant},
        headers=ADMIN_HEADERS,
    )
    assert made.status_code == 201, made.text
    key = str(made.json()["key"]["api_key"])
    for service in NEEDED:
        url = f"{stack.url(service)}{KEY_PROBES[service]}"
        _until(
            lambda url=url: httpx.get(url, headers={"X-API-Key": key}).status_code == 200,
            timeout=30,
            what=url,
        )
    return key


def _tenant_a_job(stack: Stack, key: str) -> tuple[str, str]:
    """Tenant A's job placed on one GPU, and that GPU once telemetry labels its samples for A."""
    body = {
        "kind": "job",
        "image": {"name": "pytorch", "version": "2.3"},
        "resources": {"kind": "gpu", "model": "L4", "count": 1},
        "network": NETWORK,
        "time_limit_s": 3600,
    }
    headers = {"X-API-Key": key}
    made = httpx.post(f"{stack.url('scheduler')}/v1/workloads", json=body, headers=headers)
    assert made.status_code in (201, 202), made.text
    made_rule = httpx.post(f"{stack.url('alerting')}/v1/rules", json=HOT, headers=headers)
    assert made_rule.status_code == 201, made_rule.text

    def visible_gpu() -> str | None:
        rows = httpx.get(f"{stack.url('telemetry')}/v1/gpus/latest", headers=headers).json()
        return str(rows[0]["gpu"]) if rows else None

    return str(made.json()["workload_id"]), str(_until(visible_gpu, timeout=40, what="A's GPU in telemetry"))


@pytest.fixture(scope="module")
def gateway_stack(infra: Infra, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    iso = Isolation(infra=infra)
    root = tmp_path_factory.mktemp("gateway")
    fleet, logs = root / "fleet.yaml", root / "logs"
    fleet.write_text(FLEET)
    logs.mkdir()
    env = suite_env(iso, fleet) | {"GATEWAY_HEARTBEAT_S": "0.5", "GATEWAY_LIVE_POLL_S": "0.3"}
    first = free_ports(len(SERVICES) + 1)
    stack = Stack(env=env, logs=logs, base_port=first + 1, gateway=True, gateway_port=first)
    running: GatewayStack | None = None
    try:
        stack.migrate()
        for name in (*NEEDED, GATEWAY, AGENT):
            stack.start(name)
        not_ready = stack.wait_ready(timeout_s=60, only=[*NEEDED, GATEWAY])
        assert not not_ready, f"not ready: {not_ready}"
        keys = {tenant: _tenant(stack, tenant) for tenant in ("gwa", "gwb", "gwc")}
        job, gpu = _tenant_a_job(stack, keys["gwa"])
        running = GatewayStack(stack=stack, iso=iso, keys=keys, job=job, gpu=gpu)
        yield running
    except BaseException:
        print(running.tails() if running else "\n".join(p.read_text()[-3000:] for p in logs.glob("*.log")))
        raise
    finally:
        stack.stop()
        asyncio.run(_clean(iso))


async def _clean(iso: Isolation) -> None:
    await iso.drop_schemas()
    client = create_redis(iso.infra.redis_url)
    try:
        await Keyspace(iso.redis_prefix).clear(client)
    finally:
        await client.aclose()
