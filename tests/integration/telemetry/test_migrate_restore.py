"""Migration by checkpoint and restore with real supervisors and processes, through a file:// store.

Two agents (a placement book, a process runner and its mover each, on their own GPUs and run
directories) read the scheduler's events of a migration in the order the scheduler publishes them
(placed, migrating, the target's placed, the source's migrated end); the workload counts, saves its
counter on SIGUSR1 and, started with GPUCLOUD_RESTORE_FROM, goes on from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from libs.common.events import Event
from libs.common.events.agent import MigrationStepV1, WorkloadExitedV1, WorkloadStartedV1
from libs.common.events.scheduler import (
    AllocationItem,
    RunSpec,
    WorkloadEndedV1,
    WorkloadMigratingV1,
    WorkloadPlacedV1,
)
from libs.common.objectstore import ObjectStore, keys, open_store
from services.telemetry.adapters.runner import files
from services.telemetry.adapters.runner.moves import RESTARTED, Mover
from services.telemetry.adapters.runner.process import ProcessRunner
from services.telemetry.service.agent.placements import PlacementBook

GPU_A = "GPU-aaaaaaaa-1111-1111-1111-111111111111"
GPU_B = "GPU-bbbbbbbb-2222-2222-2222-222222222222"
NOW = datetime(2026, 1, 1, tzinfo=UTC)
COUNTER = """
import json, os, pathlib, signal, sys, time
ckpt = pathlib.Path(os.environ["GPUCLOUD_CHECKPOINT_DIR"])
restore = os.environ.get("GPUCLOUD_RESTORE_FROM")
n = json.loads((pathlib.Path(restore) / "state.json").read_text())["n"] if restore else 0
print(f"from {n} on {os.environ['CUDA_VISIBLE_DEVICES']}", flush=True)
def save(*_):
    (ckpt / "state.json").write_text(json.dumps({"n": n}))
    (ckpt / "COMPLETE").touch()
signal.signal(signal.SIGUSR1, signal.SIG_IGN if os.environ.get("DEAF") else save)
while True:
    n += 1
    print(f"count {n}", flush=True)
    time.sleep(0.02)
"""


@dataclass
class Agent:
    book: PlacementBook
    runner: ProcessRunner
    mover: Mover
    events: list[Event]


def _agent(root: Path, gpu: str, store: ObjectStore) -> Agent:
    mover = Mover(store=store, wait_s=10.0, poll_s=0.05)
    runner = ProcessRunner(
        root=root, card_memory={}, log_quota_bytes=1 << 20, environ=dict(os.environ), mover=mover
    )
    return Agent(PlacementBook(runner=runner, gpus=frozenset({gpu})), runner, mover, [])


@pytest.fixture
def tmp(tmp_path: Path) -> Iterator[Path]:
    """The agents' run directories and the store; whatever still runs under them is killed after."""
    yield tmp_path
    for run in tmp_path.glob("agent-*/*"):
        for name in (files.STARTED, files.SUPERVISOR):
            doc = files.read_json(run / name)
            if doc is not None and files.process_start(int(doc["pid"])) == doc.get("start"):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(int(doc["pid"]), signal.SIGKILL)


def _placed(placement: str, gpu: str, node: str, run: RunSpec) -> WorkloadPlacedV1:
    return WorkloadPlacedV1(
        workload_id="wl-c",
        tenant_id="acme",
        placement_id=placement,
        node=node,
        allocations=[AllocationItem(gpu_uuid=gpu, units=Decimal(8), model="H100")],
        kind="job",
        run=run,
    )


def _spec(checkpoint: dict[str, object] | None = None, **env: str) -> RunSpec:
    ask = checkpoint or {"signal": "SIGUSR1", "timeout_s": 1}
    return RunSpec.model_validate(
        {"command": [sys.executable, "-c", COUNTER], "env": env, "grace_s": 2, "checkpoint": ask}
    )


async def _until(agents: list[Agent], done: Callable[[], bool], *, timeout: float = 15.0) -> None:
    """Run the agents' loops (mover, poll, delivered) until done() holds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for a in agents:
            await a.mover.step()
            a.events.extend(a.book.reports(now=NOW))
            a.runner.delivered()
        if done():
            return
        await asyncio.sleep(0.03)
    raise AssertionError(f"not done within {timeout}s: {[a.events for a in agents]}")


def _steps(agent: Agent) -> list[MigrationStepV1]:
    return [e for e in agent.events if isinstance(e, MigrationStepV1)]


def _log(agent: Agent, placement: str) -> str:
    path = agent.runner.root / files.run_dir_name(workload_id="wl-c", placement_id=placement) / files.LOG
    return path.read_text() if path.exists() else ""


def _migration(run: RunSpec) -> list[Event]:
    """The scheduler's events of a move from pl-1 (GPU A, n1) to pl-2 (GPU B, n2), in its order."""
    return [
        _placed("pl-1", GPU_A, "n1", run),
        WorkloadMigratingV1(
            workload_id="wl-c", tenant_id="acme", from_placement_id="pl-1", to_placement_id="pl-2"
        ),
        _placed("pl-2", GPU_B, "n2", run),
        WorkloadEndedV1(workload_id="wl-c", tenant_id="acme", placement_id="pl-1", outcome="migrated"),
    ]


async def _migrate(tmp: Path, run: RunSpec) -> tuple[Agent, Agent, ObjectStore]:
    """Place the counter on agent one's GPU, let it count, then migrate it to agent two's."""
    store = open_store((tmp / "store").as_uri())
    one, two = _agent(tmp / "agent-1", GPU_A, store), _agent(tmp / "agent-2", GPU_B, store)
    agents = [one, two]
    for a in agents:
        a.book.apply(_migration(run)[0], at=NOW)
    await _until(agents, lambda: "count 5\n" in _log(one, "pl-1"))
    for event in _migration(run)[1:]:
        for a in agents:
            a.book.apply(event, at=NOW)

    def ran() -> bool:
        return any(s.phase == "running" for s in _steps(two)) and "count" in _log(two, "pl-2")

    await _until(agents, ran)
    return one, two, store


def test_a_migration_moves_the_checkpoint_to_the_other_gpu_and_the_restored_process_goes_on_from_it(
    tmp: Path,
) -> None:
    one, two, store = asyncio.run(_migrate(tmp, _spec()))

    manifest = json.loads(asyncio.run(store.get(keys.checkpoint_manifest("wl-c", "pl-1"))))
    assert manifest["complete"] is True
    assert [f["path"] for f in manifest["files"]] == ["state.json"]
    size = manifest["files"][0]["size"]
    saved = json.loads(asyncio.run(store.get(keys.checkpoint_file("wl-c", "pl-1", "state.json"))))["n"]
    assert saved >= 5
    assert f"count {saved}\n" in _log(one, "pl-1")

    restored = _log(two, "pl-2")
    assert restored.startswith(f"from {saved} on {GPU_B}\ncount {saved + 1}\n")

    source = [(s.placement_id, s.phase, s.bytes_done, s.bytes_total) for s in _steps(one)]
    assert source[:2] == [("pl-1", "checkpoint", None, None)] * 2
    assert source[-1] == ("pl-1", "transfer", size, size)
    target = _steps(two)
    assert [(s.phase, s.bytes_done, s.bytes_total) for s in target[-2:]] == [
        ("restore", size, size),
        ("running", None, None),
    ]
    assert (target[-1].placement_id, target[-1].restored, target[-1].percent) == ("pl-2", True, 100)
    percents = [s.percent for s in [*_steps(one), *target]]
    assert percents == sorted(percents)
    (started,) = [e for e in two.events if isinstance(e, WorkloadStartedV1)]
    assert started.notes[0] == f"restored from the checkpoint of pl-1 (1 file(s), {size} bytes)"
    assert not [e for e in one.events if isinstance(e, WorkloadExitedV1)]  # a move is no exit

    for root, gpu in ((tmp / "agent-1", GPU_A), (tmp / "agent-2", GPU_B)):  # both agents restart
        again = _agent(root, gpu, store)
        for event in _migration(_spec()):  # and replay the topic
            again.book.apply(event, at=NOW)
        again.runner.poll(now=NOW)
        assert again.mover.busy == 0  # nothing uploaded, waited for or downloaded again
        assert again.runner.runs == 1  # nothing launched again


def test_a_workload_that_does_not_checkpoint_restarts_from_the_start_and_says_so(tmp: Path) -> None:
    one, two, store = asyncio.run(_migrate(tmp, _spec(DEAF="1")))

    manifest = json.loads(asyncio.run(store.get(keys.checkpoint_manifest("wl-c", "pl-1"))))
    assert (manifest["complete"], manifest["why"]) == (False, "no checkpoint within 1s")
    assert _log(two, "pl-2").startswith(f"from 0 on {GPU_B}\ncount 1\n")
    note = f"{RESTARTED}: pl-1 could not checkpoint: no checkpoint within 1s"
    running = _steps(two)[-1]
    assert (running.phase, running.restored, running.note) == ("running", False, note)
    (started,) = [e for e in two.events if isinstance(e, WorkloadStartedV1)]
    assert started.notes[0] == note
    assert [s.note for s in _steps(one)][-1] == "no checkpoint: no checkpoint within 1s"


def test_a_migration_between_gpus_of_one_agent_restores_a_commands_checkpoint_through_the_store_too(
    tmp: Path,
) -> None:
    # The command runs in the workload's environment: it finds its checkpoint directory there.
    save = ["sh", "-c", 'echo \'{"n": 41}\' > "$GPUCLOUD_CHECKPOINT_DIR/state.json"']

    async def go() -> Agent:
        store = open_store((tmp / "store").as_uri())
        agent = _agent(tmp / "agent-1", GPU_A, store)
        agent.book = PlacementBook(runner=agent.runner, gpus=frozenset({GPU_A, GPU_B}))
        run = _spec({"command": save, "timeout_s": 5})
        agent.book.apply(_placed("pl-1", GPU_A, "n1", run), at=NOW)
        await _until([agent], lambda: "count 3\n" in _log(agent, "pl-1"))
        moving = WorkloadMigratingV1(
            workload_id="wl-c", tenant_id="acme", from_placement_id="pl-1", to_placement_id="pl-2"
        )
        for event in (moving, _placed("pl-2", GPU_B, "n1", run)):
            agent.book.apply(event, at=NOW)
        await _until([agent], lambda: "count" in _log(agent, "pl-2"))
        return agent

    agent = asyncio.run(go())
    assert _log(agent, "pl-2").startswith(f"from 41 on {GPU_B}\ncount 42\n")
    assert _steps(agent)[-1].restored is True
