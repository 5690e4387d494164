"""Two real scheduler processes on one schema: the active placer lost mid-stream of submissions, killed
with SIGKILL or alive with its lock's session terminated."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import asyncpg
import httpx
import pytest

from libs.common.db.locks import advisory_lock_holder
from libs.common.events.scheduler import WorkloadPlacedV1
from libs.devkit.broker import free_port
from tests.integration.scheduler.helpers import register_gpus, scheduler_reader, spec
from tests.integration.support import ADMIN_HEADERS, Isolation, eventually

WORKLOADS = 40
KILL_AFTER = 15


def _start(iso: Isolation, port: int, log: Path) -> subprocess.Popen[bytes]:
    env = iso.environ("scheduler", port=port, SCHEDULER_PASS_INTERVAL_S="0.2", OUTBOX_POLL_INTERVAL_S="0.2")
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "services.scheduler"], env=env, stdout=out, stderr=subprocess.STDOUT
        )


async def _is_placer(client: httpx.AsyncClient) -> bool:
    try:
        response = await client.get("/v1/admin/queues", headers=ADMIN_HEADERS)
    except httpx.TransportError:
        return False
    return response.status_code == 200 and bool(response.json()["placer_here"])


async def _one_placer(clients: list[httpx.AsyncClient]) -> bool:
    return sum([await _is_placer(c) for c in clients]) == 1


async def _answers(client: httpx.AsyncClient) -> bool:
    try:
        return (await client.get("/healthz")).status_code == 200
    except httpx.TransportError:
        return False


async def _placer_lock_holder(iso: Isolation) -> int | None:
    conn = await asyncpg.connect(iso.infra.database_url)
    try:
        return await advisory_lock_holder(conn, f"gpucloud.scheduler.placer.{iso.schema('scheduler')}")
    finally:
        await conn.close()


async def _cut_lock_session(iso: Isolation) -> None:
    """End the active placer's lock session while its process lives on (a terminated backend), and
    wait until a live session holds the lock again (either process's: whichever asks first)."""
    holder = await _placer_lock_holder(iso)
    assert holder is not None, "the active placer holds the lock"
    conn = await asyncpg.connect(iso.infra.database_url)
    try:
        assert await conn.fetchval("SELECT pg_terminate_backend($1)", holder)
    finally:
        await conn.close()

    async def moved() -> bool:
        return (await _placer_lock_holder(iso)) not in (None, holder)

    await eventually(moved, timeout=20, interval=0.1, what="the placer's lock held by a new session")


@pytest.mark.parametrize("loss", ["sigkill", "lock session cut"])
async def test_a_lost_placer_is_replaced_and_every_workload_is_placed_exactly_once(
    isolation: Isolation, tmp_path: Path, loss: str
) -> None:
    ports = (free_port(), free_port())
    leader = _start(isolation, ports[0], tmp_path / "a.log")
    standby: subprocess.Popen[bytes] | None = None
    try:
        async with (
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{ports[0]}", timeout=10) as a,
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{ports[1]}", timeout=10) as b,
            scheduler_reader(isolation) as reader,
        ):
            await eventually(lambda: _is_placer(a), timeout=60, interval=0.2, what="first replica leads")
            standby = _start(isolation, ports[1], tmp_path / "b.log")
            await eventually(lambda: _answers(b), timeout=60, interval=0.2, what="second replica up")
            assert not await _is_placer(b)
            created = await b.post(
                "/v1/admin/tenants", json={"tenant_id": "acme", "name": "Acme"}, headers=ADMIN_HEADERS
            )
            headers = {"X-API-Key": created.json()["key"]["api_key"]}
            for node in range(6):
                await register_gpus(isolation, node=f"node-{node}", count=8)

            ids: list[str] = []
            killed_at = 0.0
            for i in range(WORKLOADS):
                response = await b.post("/v1/workloads", json=spec(count=1), headers=headers)
                assert response.status_code == 201, response.text
                ids.append(response.json()["workload_id"])
                if i == KILL_AFTER:
                    await reader.wait_for(
                        lambda evs: any(isinstance(p, WorkloadPlacedV1) for _, p in evs), timeout=30
                    )
                    if loss == "sigkill":
                        leader.send_signal(signal.SIGKILL)
                        leader.wait(timeout=10)
                    else:  # both processes live on; whichever takes the lock next places, alone
                        await _cut_lock_session(isolation)
                    killed_at = time.monotonic()

            survivors = [b] if loss == "sigkill" else [a, b]
            await eventually(
                lambda: _one_placer(survivors), timeout=20, interval=0.1, what="one placer again"
            )
            takeover_s = time.monotonic() - killed_at
            events = await reader.wait_for(
                lambda evs: {p.workload_id for _, p in evs if isinstance(p, WorkloadPlacedV1)} >= set(ids),
                timeout=60,
                what="every workload placed",
            )
            # A replica that lost its session notices at its next pass, so between two passes both may say
            # they place (each workload is still placed once: one live placement per workload, one
            # holder per GPU slot, whoever writes first): one placer, eventually.
            await eventually(
                lambda: _one_placer(survivors), timeout=10, interval=0.1, what="one placer at the end"
            )
    finally:
        for proc in (leader, standby):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)

    placements: dict[str, set[str]] = defaultdict(set)
    event_ids: dict[str, set[str]] = defaultdict(set)
    for env, payload in events:
        if isinstance(payload, WorkloadPlacedV1):
            placements[payload.workload_id].add(payload.placement_id)
            event_ids[payload.workload_id].add(env.id)
    assert set(placements) == set(ids), "no placement lost"
    assert all(len(p) == 1 for p in placements.values()), "no workload placed twice"
    assert all(len(e) == 1 for e in event_ids.values()), "no second placement event for a workload"
    assert takeover_s < 10, f"standby took {takeover_s:.1f}s to take over"
