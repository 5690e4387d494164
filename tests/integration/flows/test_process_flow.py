"""A real process through its whole life, with inventory, the scheduler and the node agent as processes
(TELEMETRY_AGENT_RUNNER=process on a simulated fleet: the GPU UUIDs are the fleet's): placed, started with
its pid and notes, logging (its output.log on the host while it runs; GET /v1/workloads/{id}/logs once
shipped), preempted by urgent work, which finishes, then migrated by checkpoint and restore and finished
itself; then a task (POST /v1/tasks) answers with its exit, log tail and output file."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from libs.common.events import Envelope, Event, envelop, topics
from libs.common.events.agent import MigrationStepV1, WorkloadExitedV1
from libs.common.events.recovery import MigrationRequestedV1
from libs.common.events.scheduler import WorkloadPlacedV1
from libs.devkit.broker import free_ports
from libs.devkit.devstack import AGENT, Stack
from tests.integration.bus_fixtures import publish
from tests.integration.flows.journey import NETWORK
from tests.integration.flows.suite import SERVICES, suite_env
from tests.integration.support import ADMIN_HEADERS, Isolation, TopicReader, eventually

pytestmark = pytest.mark.integration

FLEET = """
nodes:
  - hostname: pf-l4
    labels: {zone: z1, region: r1, pool: inference}
    gpus:
      - {model: L4, count: 2}
"""
#: Inventory, the scheduler and the agent are all this flow needs; the other four stay down.
NEEDED = ("inventory", "scheduler")
#: Prints who it is and where, then waits for the test's "go" file (or a signal) and exits 0. On SIGUSR1 it
#: checkpoints the GPU it ran on; restored, it says what it read.
WAITER = (
    "import os, signal, sys, time\n"
    "env = os.environ\n"
    "ck = env['GPUCLOUD_CHECKPOINT_DIR']\n"
    "def save(*_):\n"
    "    open(os.path.join(ck, 'state'), 'w').write(env['CUDA_VISIBLE_DEVICES'])\n"
    "    open(os.path.join(ck, 'COMPLETE'), 'w').close()\n"
    "signal.signal(signal.SIGUSR1, save)\n"
    "if env.get('GPUCLOUD_RESTORE_FROM'):\n"
    "    print('restored', open(os.path.join(env['GPUCLOUD_RESTORE_FROM'], 'state')).read(), flush=True)\n"
    "print('hello from', env['GPUCLOUD_WORKLOAD_ID'], 'on', env['CUDA_VISIBLE_DEVICES'], flush=True)\n"
    "while not os.path.exists(sys.argv[1]): time.sleep(0.1)\n"
    "print('bye', flush=True)\n"
)


@asynccontextmanager
async def _stack(iso: Isolation, tmp_path: Path) -> AsyncIterator[tuple[Stack, httpx.AsyncClient]]:
    fleet, logs = tmp_path / "fleet.yaml", tmp_path / "logs"
    fleet.write_text(FLEET)
    logs.mkdir()
    env = suite_env(iso, fleet) | {
        "TELEMETRY_AGENT_RUNNER": "process",
        "TELEMETRY_AGENT_WORKLOAD_DIR": str(tmp_path / "runs"),
        "SCHEDULER_PREEMPTION_GRACE_S": "0.5",
        "OBJECT_STORE_URL": (
            tmp_path / "objects"
        ).as_uri(),  # the agent ships logs, the scheduler serves them
    }
    stack = Stack(env=env, logs=logs, base_port=free_ports(len(SERVICES)))
    try:
        await asyncio.to_thread(stack.migrate)
        for name in (*NEEDED, AGENT):
            stack.start(name)
        not_ready = await asyncio.to_thread(stack.wait_ready, timeout_s=60, only=list(NEEDED))
        assert not not_ready, f"not ready: {not_ready}\n{_tails(stack)}"
        async with httpx.AsyncClient(base_url=stack.url("scheduler"), timeout=30) as client:
            yield stack, client
    except BaseException:
        print(_tails(stack))
        raise
    finally:
        await asyncio.to_thread(stack.stop)


def _tails(stack: Stack) -> str:
    paths = [stack.logs / f"{n}.log" for n in (*NEEDED, AGENT)]
    return "\n".join(
        f"--- {p.name}\n" + "\n".join(p.read_text().splitlines()[-30:]) for p in paths if p.exists()
    )


async def _tenant(client: httpx.AsyncClient, tenant_id: str) -> dict[str, str]:
    made = await client.post(
        "/v1/admin/tenants", json={"tenant_id": tenant_id, "name": tenant_id}, headers=ADMIN_HEADERS
    )
    assert made.status_code == 201, made.text
    headers = {"X-API-Key": made.json()["key"]["api_key"]}

    async def works() -> bool:
        return (await client.get("/v1/workloads", headers=headers)).status_code == 200

    await eventually(works, timeout=20, interval=0.2, what=f"{tenant_id}'s key")
    return headers


async def _submit(client: httpx.AsyncClient, headers: dict[str, str], *, go: Path, **extra: Any) -> str:
    body = {
        "kind": "job",
        "image": {"name": "pytorch", "version": "2.3"},
        "resources": {"kind": "gpu", "model": "L4", "count": 1},
        "network": NETWORK,
        "command": [sys.executable, "-c", WAITER, str(go)],
        "grace_s": 2,
        **extra,
    }
    made = await client.post("/v1/workloads", json=body, headers=headers)
    assert made.status_code == 201, made.text
    return str(made.json()["workload_id"])


async def _shown(
    client: httpx.AsyncClient, headers: dict[str, str], wid: str, *, state: str, not_on: str = ""
) -> Any:
    last: list[Any] = [None]

    async def probe() -> Any:
        last[0] = (await client.get(f"/v1/workloads/{wid}", headers=headers)).json()
        w = last[0]
        ok = w["state"] == state and w["placement_id"] != not_on and (state != "running" or w["host"])
        return w if ok else None

    try:
        return await eventually(probe, timeout=30, interval=0.2, what=f"{wid} {state}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; last seen: {last[0]}") from None


def _of(events: list[tuple[Envelope, Event]], kind: type[Any], wid: str) -> list[Any]:
    return [p for _, p in events if isinstance(p, kind) and p.workload_id == wid]


async def _output(runs: Path, wid: str, placement: str, line: str) -> str:
    """A run's output.log on the host once it holds ``line`` (a running run's log ships in chunks later)."""

    def read() -> str | None:
        for log in runs.glob(f"*/{wid}-*/output.log"):
            spec = (log.parent / "spec.json").read_text()
            if placement in spec and line in (text := log.read_text()):
                return text
        return None

    return await eventually(lambda: asyncio.to_thread(read), timeout=20, interval=0.2, what=f"{wid}'s output")


async def test_a_process_runs_logs_is_preempted_finishes_and_migrates(
    isolation: Isolation, tmp_path: Path
) -> None:
    runs, go_steady, go_spot = tmp_path / "runs", tmp_path / "go-steady", tmp_path / "go-spot"
    agent_topic = TopicReader(
        bootstrap=isolation.infra.kafka, topic=isolation.topic_prefix + topics.NODE_AGENT
    )
    sched_topic = TopicReader(
        bootstrap=isolation.infra.kafka, topic=isolation.topic_prefix + topics.SCHEDULER
    )
    async with _stack(isolation, tmp_path) as (_, client), agent_topic as agent, sched_topic as sched:
        try:
            acme, globex = await _tenant(client, "acme"), await _tenant(client, "globex")
            # Placed and started: the scheduler shows the host's pid and notes; its output is on the host.
            spot = await _submit(
                client,
                acme,
                go=go_spot,
                urgency=0.0,
                preemptible=True,
                checkpoint={"signal": "SIGUSR1", "timeout_s": 10},
            )
            first = await _shown(client, acme, spot, state="running")
            assert (first["host"]["runner"], first["host"]["pid"] > 0) == ("process", True)
            assert first["host"]["notes"] == ["no CPU or memory limit asked"]
            gpu = await _gpu_of(sched, spot, first["placement_id"])
            assert f"hello from {spot} on {gpu}" in await _output(runs, spot, first["placement_id"], "hello")

            # Preempted: a steady job takes the other GPU, so urgent work of another tenant takes the spot's;
            # the host stops it with SIGTERM and says so.
            steady = await _submit(client, acme, go=go_steady, urgency=0.0)
            await _shown(client, acme, steady, state="running")
            urgent = await _submit(
                client,
                globex,
                go=go_spot,
                urgency=1.0,
                command=[sys.executable, "-c", "print('urgent done')"],
            )
            events = await agent.wait_for(
                lambda evs: any(
                    e.placement_id == first["placement_id"] for e in _of(evs, WorkloadExitedV1, spot)
                ),
                timeout=20,
                what="the spot workload's exit",
            )
            (exited,) = [
                e for e in _of(events, WorkloadExitedV1, spot) if e.placement_id == first["placement_id"]
            ]
            assert (exited.exit_reason, exited.signal) == ("preempted", signal.SIGTERM)

            # Finished: exit 0 is succeeded, and the scheduler's workload ends completed.
            done = await _shown(client, globex, urgent, state="completed")
            assert (done["outcome"], done["exit"]) == (
                "completed",
                {"reason": "succeeded", "code": 0, "signal": None},
            )
            logs = await client.get(f"/v1/workloads/{urgent}/logs", headers=globex)
            assert (logs.status_code, logs.text) == (200, "urgent done\n")

            # The requeued spot runs again; once the steady job finishes, recovery's request moves it to the
            # GPU that job left: stopped, and started again there.
            again = await _shown(client, acme, spot, state="running", not_on=first["placement_id"])
            go_steady.touch()
            await _shown(client, acme, steady, state="completed")
            gpu_before = await _gpu_of(sched, spot, again["placement_id"])
            move = MigrationRequestedV1(
                incident_id="inc-pf", workload_id=spot, tenant_id="acme", away_from_gpu=gpu_before
            )
            await publish(isolation, [envelop(move, source="test")], topic=topics.RECOVERY)
            moved = await _shown(client, acme, spot, state="running", not_on=again["placement_id"])
            gpu_after = await _gpu_of(sched, spot, moved["placement_id"])
            assert gpu_after != gpu_before
            assert moved["host"]["pid"] != again["host"]["pid"]
            # Restored: the checkpoint it wrote on SIGUSR1 on the old GPU is read by the new process.
            assert not any(n.startswith("restarted") for n in moved["host"]["notes"]), moved["host"]
            restored = await _output(runs, spot, moved["placement_id"], "hello")
            assert restored == f"restored {gpu_before}\nhello from {spot} on {gpu_after}\n"
            steps = await agent.wait_for(
                lambda evs: any(s.restored for s in _of(evs, MigrationStepV1, spot)), what="the restore"
            )
            transfer = [s for s in _of(steps, MigrationStepV1, spot) if s.phase == "transfer"]
            assert transfer, "no transfer step"
            assert transfer[-1].bytes_done == transfer[-1].bytes_total == len(gpu_before)
        finally:
            go_steady.touch()  # every waiter still running ends by itself
            go_spot.touch()
        ended = await _shown(client, acme, spot, state="completed")
        assert ended["exit"] == {"reason": "succeeded", "code": 0, "signal": None}
        last = await client.get(
            f"/v1/workloads/{spot}/logs", params={"placement": ended["placement_id"]}, headers=acme
        )
        assert (last.status_code, last.text) == (200, f"{restored}bye\n")

        # A task: submitted, run, and answered with its result in one request; its tenant's only.
        answer = (
            "import os; print('answer 42')\n"
            "open(os.path.join(os.environ['GPUCLOUD_OUTPUT_DIR'], 'result.txt'), 'w').write('42')"
        )
        task = await client.post(
            "/v1/tasks",
            json={
                "image": {"name": "pytorch", "version": "2.3"},
                "resources": {"kind": "gpu", "model": "L4", "count": 1},
                "network": NETWORK,
                "command": [sys.executable, "-c", answer],
                "wait_s": 30,
            },
            headers=globex,
        )
        assert task.status_code == 200, task.text
        result = task.json()
        assert (result["exit_reason"], result["exit_code"], result["log_tail"]) == (
            "succeeded",
            0,
            "answer 42\n",
        )
        assert result["outputs"] == [{"path": "result.txt", "size": 2}]
        tid = result["workload_id"]
        got = await client.get(f"/v1/workloads/{tid}/outputs/result.txt", headers=globex)
        assert (got.status_code, got.content) == (200, b"42")
        for path in (f"/v1/tasks/{tid}", f"/v1/workloads/{tid}/logs", f"/v1/workloads/{tid}/outputs"):
            assert (await client.get(path, headers=acme)).status_code == 404, path


async def _gpu_of(reader: TopicReader, wid: str, placement_id: str) -> str:
    events = await reader.wait_for(
        lambda evs: any(p.placement_id == placement_id for p in _of(evs, WorkloadPlacedV1, wid)),
        what="placed",
    )
    placed = next(p for p in _of(events, WorkloadPlacedV1, wid) if p.placement_id == placement_id)
    return str(placed.allocations[0].gpu_uuid)
