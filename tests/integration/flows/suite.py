"""The whole suite as real processes (libs.devkit.devstack.Stack) and a small client to drive it."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from libs.common.settings import DEV_ADMIN_KEY
from libs.devkit.broker import free_ports
from libs.devkit.devstack import AGENT, Stack
from libs.devkit.running import KEY_PROBES
from services.inventory.adapters.fleet_yaml import gpu_uuid
from tests.integration.support import ADMIN_HEADERS, Isolation, TopicReader, eventually

__all__ = ["FLEET", "Suite", "gpus_of", "running_suite", "signature_ok"]

SERVICES = ("inventory", "scheduler", "telemetry", "alerting", "billing", "recovery")

# Four nodes: an A100 node with one GPU in MIG mode, an H100 node and two L4 nodes (so a whole-node
# drain of one L4 node still leaves L4s to migrate to).
FLEET = """
nodes:
  - hostname: fa-a100
    labels: {zone: z1, region: r1, pool: training}
    gpus:
      - {model: A100-80GB, count: 3}
      - {model: A100-80GB, count: 1, mig: [3g.40gb, 2g.20gb, "1g.10gb@6"]}
  - hostname: fa-h100
    labels: {zone: z1, region: r1, pool: training}
    gpus:
      - {model: H100-80GB-SXM, count: 4}
  - hostname: fa-l4a
    labels: {zone: z1, region: r1, pool: inference}
    gpus:
      - {model: L4, count: 2}
  - hostname: fa-l4b
    labels: {zone: z1, region: r1, pool: inference}
    gpus:
      - {model: L4, count: 2}
"""
NODES = {"fa-a100": 4, "fa-h100": 4, "fa-l4a": 2, "fa-l4b": 2}

# Fast timings for a test; production defaults are in each service's settings.py.
TIMINGS = {
    "OUTBOX_POLL_INTERVAL_S": "0.2",
    "SCHEDULER_PASS_INTERVAL_S": "0.2",
    "SCHEDULER_LOCK_RETRY_S": "0.5",
    "TELEMETRY_AGENT_MODE": "simulated",
    "TELEMETRY_SIM_SPEED": "5",
    "TELEMETRY_ROLLUP_INTERVAL_S": "3",
    "TELEMETRY_ROLLUP_GRACE_S": "0.5",
    "TELEMETRY_ALLOCATION_REFRESH_S": "0.5",
    "ALERTING_DELIVERY_POLL_S": "0.1",
    "ALERTING_RETRY_BASE_S": "0.2",
    "ALERTING_RETRY_CAP_S": "1",
    "ALERTING_OFFSET_COMMIT_INTERVAL_S": "0.5",
    "BILLING_ACCRUAL_INTERVAL_S": "2",
    "BILLING_RATING_INTERVAL_S": "2",
    "RECOVERY_SETTLE_S": "2",
    "RECOVERY_TICK_S": "0.5",
    "LOG_JSON": "false",
    "PYTHONUNBUFFERED": "1",
}


def fleet_gpus() -> dict[str, list[str]]:
    """The GPU uuids of every node of FLEET, as inventory and the agent both derive them."""
    return {node: [gpu_uuid(hostname=node, index=i) for i in range(n)] for node, n in NODES.items()}


def gpus_of(placed: Any) -> list[str]:
    """GPU uuids a WorkloadPlacedV1 holds."""
    return [a.gpu_uuid for a in placed.allocations]


def signature_ok(secret: bytes, body: bytes, headers: dict[str, str]) -> bool:
    """docs/alerting.md's verification: HMAC-SHA256 over '<timestamp>.' + raw body."""
    stamp, given = headers.get("x-gpucloud-timestamp", ""), headers.get("x-gpucloud-signature", "")
    expected = hmac.new(secret, stamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return given == f"sha256={expected}"


@dataclass
class Suite:
    """The running suite: one HTTP client per service, admin helpers, kill and restart."""

    stack: Stack
    iso: Isolation
    http: dict[str, httpx.AsyncClient] = field(default_factory=dict)

    def __getattr__(self, name: str) -> httpx.AsyncClient:
        if name in SERVICES:
            return self.http[name]
        raise AttributeError(name)

    def topic(self, logical: str) -> str:
        """A topic's real name in this test's slice."""
        return self.iso.topic_prefix + logical

    def reader(self, logical: str) -> TopicReader:
        """A reader of one topic from its beginning."""
        return TopicReader(bootstrap=self.iso.infra.kafka, topic=self.topic(logical))

    async def create_tenant(self, tenant_id: str) -> dict[str, str]:
        """Create a tenant through the scheduler's admin API and wait for its key to work everywhere."""
        response = await self.scheduler.post(
            "/v1/admin/tenants",
            json={"tenant_id": tenant_id, "name": tenant_id.title()},
            headers=ADMIN_HEADERS,
        )
        assert response.status_code == 201, response.text
        headers = {"X-API-Key": response.json()["key"]["api_key"]}
        await self.wait_key(headers)
        return headers

    async def wait_key(self, headers: dict[str, str]) -> None:
        """Until the key authenticates on all six services (replicated by platform.tenants)."""
        for service, path in KEY_PROBES.items():

            async def works(service: str = service, path: str = path) -> bool:
                try:
                    return (await self.http[service].get(path, headers=headers)).status_code != 401
                except httpx.HTTPError:
                    return False

            await eventually(works, timeout=30, interval=0.2, what=f"key replicated to {service}")

    async def kill(self, name: str) -> None:
        """SIGKILL one process."""
        await asyncio.to_thread(self.stack.kill, name)

    async def restart(self, name: str) -> None:
        """Start a killed process again and wait until it is ready."""
        restarted = datetime.now(UTC)
        await asyncio.to_thread(self.stack.restart, name)
        if name == AGENT:  # ready once it samples again: its replay of placements is done by then
            await eventually(lambda: self._sampled_since(restarted), timeout=60, interval=0.5, what="agent")
            return
        not_ready = await asyncio.to_thread(self.stack.wait_ready, timeout_s=60, only=[name])
        assert not not_ready, f"{name} not ready after restart: {not_ready}"

    async def _sampled_since(self, instant: datetime) -> bool:
        rows = (await self.telemetry.get("/v1/gpus/latest", headers=ADMIN_HEADERS)).json()
        return any(datetime.fromisoformat(r["at"]) > instant for r in rows)

    async def sql(self, service: str, query: str, *args: Any) -> list[asyncpg.Record]:
        """Read a service's own schema (assertions only; services never read each other's)."""
        conn = await asyncpg.connect(self.iso.infra.database_url)
        try:
            await conn.execute(f'SET search_path TO "{self.stack.schema(service)}"')
            return list(await conn.fetch(query, *args))
        finally:
            await conn.close()

    def log_tails(self, lines: int = 40) -> str:
        """The end of every process's log."""
        out = []
        for name in self.stack.names:
            path = self.stack.logs / f"{name}.log"
            text = path.read_text(errors="replace").splitlines()[-lines:] if path.exists() else []
            out.append(f"----- {name} ({path}) -----\n" + "\n".join(text))
        return "\n".join(out)


def suite_env(iso: Isolation, fleet: Path) -> dict[str, str]:
    """The environment every process of the suite shares."""
    return {
        **os.environ,
        "KAFKA_BOOTSTRAP_SERVERS": iso.infra.kafka,
        "DATABASE_URL": iso.infra.database_url,
        "REDIS_URL": iso.infra.redis_url,
        "KAFKA_TOPIC_PREFIX": iso.topic_prefix,
        "GPUCLOUD_SCHEMA_PREFIX": f"t{iso.token}_",
        "REDIS_PREFIX": iso.redis_prefix,
        "ENVIRONMENT": "development",
        "ADMIN_API_KEY": DEV_ADMIN_KEY,
        "INVENTORY_FLEET_FILE": str(fleet),
        "TELEMETRY_FLEET_FILE": str(fleet),
        **TIMINGS,
    }


@asynccontextmanager
async def running_suite(
    iso: Isolation, tmp_path: Path, *, env: dict[str, str] | None = None
) -> AsyncIterator[Suite]:
    """Migrate, start the six services and the agent, wait until ready; stop everything after.

    ``env`` is laid over ``suite_env`` (another database URL, say)."""
    fleet, logs = tmp_path / "fleet.yaml", tmp_path / "logs"
    fleet.write_text(FLEET)
    logs.mkdir()
    stack = Stack(env=suite_env(iso, fleet) | (env or {}), logs=logs, base_port=free_ports(len(SERVICES)))
    suite = Suite(stack=stack, iso=iso)
    try:
        await asyncio.to_thread(stack.migrate)
        stack.start()
        not_ready = await asyncio.to_thread(stack.wait_ready, timeout_s=90)
        assert not not_ready, f"not ready: {not_ready}\n{suite.log_tails()}"
        no_keepalive = httpx.Limits(max_keepalive_connections=0)
        for service in SERVICES:
            suite.http[service] = httpx.AsyncClient(
                base_url=stack.url(service), timeout=30, limits=no_keepalive
            )
        yield suite
    finally:
        for client in suite.http.values():
            await client.aclose()
        await asyncio.to_thread(stack.stop)
