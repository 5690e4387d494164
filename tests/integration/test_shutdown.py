"""A service whose broker has gone away still stops promptly on SIGTERM, and loses no event doing so."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import sys
import time
from pathlib import Path

import asyncpg
import httpx

from libs.devkit.broker import EmbeddedBroker, free_port
from tests.integration.support import ADMIN_HEADERS, Isolation, eventually

#: What an orchestrator waits between SIGTERM and SIGKILL by default (Kubernetes: 30 s).
GRACE_S = 30.0


#: Longest a starting service may take to act on SIGTERM (its broker wait alone lasts 30 s).
STARTING_GRACE_S = 10.0


def _start(iso: Isolation, bootstrap: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    env = iso.environ("scheduler", port=port, bootstrap=bootstrap)
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "services.scheduler"], env=env, stdout=out, stderr=subprocess.STDOUT
        )


async def _sigterm(service: subprocess.Popen[bytes], *, wait_s: float) -> float:
    """Send SIGTERM and wait up to ``wait_s`` for the process to exit; returns the seconds it took."""
    service.send_signal(signal.SIGTERM)
    started = time.monotonic()
    with contextlib.suppress(subprocess.TimeoutExpired):
        await asyncio.to_thread(service.wait, wait_s)
    return time.monotonic() - started


async def test_sigterm_with_the_broker_gone_stops_within_the_grace_and_keeps_unsent_events(
    isolation: Isolation, tmp_path: Path
) -> None:
    port, log = free_port(), tmp_path / "scheduler.log"
    with EmbeddedBroker(log_path=tmp_path / "broker.log") as broker:
        service = _start(isolation, broker.bootstrap, port, log)
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:

                async def ready() -> bool:
                    try:
                        return (await client.get("/readyz")).status_code == 200
                    except httpx.TransportError:
                        return False

                await eventually(ready, timeout=60, what="scheduler ready")
                broker.stop()
                # Events committed while the broker is away: the relay cannot publish them.
                for i in range(3):
                    body = {"tenant_id": f"late-{i}", "name": "L"}
                    created = await client.post("/v1/admin/tenants", json=body, headers=ADMIN_HEADERS)
                    assert created.status_code == 201, created.text
            await asyncio.sleep(1.0)  # the relay and consumers are now retrying against a dead broker
            took = await _sigterm(service, wait_s=GRACE_S + 30)
        finally:
            if service.poll() is None:
                service.kill()
                service.wait()
    assert took < GRACE_S, f"took {took:.1f}s to stop after SIGTERM:\n{log.read_text()[-3000:]}"
    conn = await asyncpg.connect(isolation.infra.database_url)
    try:
        unsent = await conn.fetchval(
            f'SELECT count(*) FROM "{isolation.schema("scheduler")}".outbox WHERE sent_at IS NULL'
        )
    finally:
        await conn.close()
    # Tenant created + key issued per tenant: every event is still in the outbox, for the next start.
    assert unsent >= 6


async def _pool_open(iso: Isolation) -> bool:
    """Whether the scheduler's pool (opened just before start-up waits for the broker) is connected."""
    conn = await asyncpg.connect(iso.infra.database_url)
    try:
        name = f"gpucloud-{iso.schema('scheduler')}"
        return bool(
            await conn.fetchval("SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", name)
        )
    finally:
        await conn.close()


async def test_sigterm_while_start_up_waits_for_an_absent_broker_stops_the_service_at_once(
    isolation: Isolation, tmp_path: Path
) -> None:
    log = tmp_path / "scheduler.log"
    service = _start(isolation, f"127.0.0.1:{free_port()}", free_port(), log)  # nobody listens there
    try:
        await eventually(lambda: _pool_open(isolation), timeout=30, what="start-up past Postgres")
        await asyncio.sleep(0.5)  # its pool open, start-up now waits for the broker: a few tries in
        assert service.poll() is None, log.read_text()
        took = await _sigterm(service, wait_s=40)
    finally:
        if service.poll() is None:
            service.kill()
            service.wait()
    assert took < STARTING_GRACE_S, f"took {took:.1f}s to stop after SIGTERM:\n{log.read_text()[-3000:]}"
    assert service.returncode != 0  # it never served: start-up failed, and says so
