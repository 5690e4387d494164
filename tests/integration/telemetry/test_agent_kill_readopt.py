"""The node agent as a real process with the process runner, SIGKILLed while two workloads run: the one
that ended while it was down is reported once, with its exit code, by the agent started again; the one
still running is adopted, not started a second time, and its exit is reported once when it ends."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

from libs.common.bus.kafka import all_physical_topics, ensure_topics
from libs.common.events import Envelope, Event, envelop, topics
from libs.common.events.agent import WorkloadExitedV1, WorkloadStartedV1
from libs.common.events.scheduler import AllocationItem, RunSpec, WorkloadPlacedV1
from libs.devkit.broker import free_port
from services.telemetry.adapters.sim.ids import gpu_uuid
from tests.integration.bus_fixtures import publish
from tests.integration.support import Isolation, TopicReader, eventually
from tests.integration.telemetry.stack import FLEET

A0 = gpu_uuid(hostname="tnode-a", index=0)
A1 = gpu_uuid(hostname="tnode-a", index=1)
#: Appends its pid to a file (one line per process ever started), waits for its go file, exits with $2.
WORKLOAD = (
    "import os, sys, time\n"
    "open(sys.argv[1] + '.pids', 'a').write(f'{os.getpid()}\\n')\n"
    "while not os.path.exists(sys.argv[1]): time.sleep(0.05)\n"
    "sys.exit(int(sys.argv[2]))\n"
)


def _placed(workload: str, gpu: str, go: Path, code: int) -> Envelope:
    event = WorkloadPlacedV1(
        workload_id=workload,
        tenant_id="acme",
        placement_id=f"pl-{workload}",
        node="tnode-a",
        allocations=[AllocationItem(gpu_uuid=gpu, units=Decimal(8), model="H100")],
        kind="job",
        run=RunSpec(command=[sys.executable, "-c", WORKLOAD, str(go), str(code)], grace_s=2),
    )
    return envelop(event, source="test")


def _started(events: list[tuple[Envelope, Event]]) -> list[WorkloadStartedV1]:
    return [p for _, p in events if isinstance(p, WorkloadStartedV1)]


def _exited(events: list[tuple[Envelope, Event]]) -> list[WorkloadExitedV1]:
    return [p for _, p in events if isinstance(p, WorkloadExitedV1)]


def _pids(go: Path) -> list[str]:
    return Path(f"{go}.pids").read_text().split()


def _ended_meanwhile(runs: Path) -> bool:
    return any(runs.glob("*/wl-short-*/exit.json"))


def _agent(isolation: Isolation, tmp_path: Path, log: Path) -> subprocess.Popen[bytes]:
    env = isolation.environ(
        "telemetry",
        port=free_port(),
        TELEMETRY_AGENT_MODE="simulated",
        TELEMETRY_AGENT_RUNNER="process",
        TELEMETRY_FLEET_FILE=str(tmp_path / "fleet.yaml"),
        TELEMETRY_SAMPLE_INTERVAL_S="0.25",
        TELEMETRY_AGENT_WORKLOAD_DIR=str(tmp_path / "runs"),
    )
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "services.telemetry", "agent"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


async def test_an_agent_killed_9_adopts_its_running_workload_and_reports_the_one_that_ended_meanwhile(
    isolation: Isolation, tmp_path: Path
) -> None:
    (tmp_path / "fleet.yaml").write_text(FLEET)
    go_short, go_long, log = tmp_path / "go-short", tmp_path / "go-long", tmp_path / "agent.log"
    await ensure_topics(
        bootstrap=isolation.infra.kafka, topics=all_physical_topics(isolation.topic_prefix), partitions=3
    )
    agent = _agent(isolation, tmp_path, log)
    try:
        async with TopicReader(
            bootstrap=isolation.infra.kafka, topic=isolation.topic_prefix + topics.NODE_AGENT
        ) as reader:
            await publish(
                isolation,
                [_placed("wl-short", A0, go_short, 5), _placed("wl-long", A1, go_long, 0)],
                topic=topics.SCHEDULER,
            )
            await reader.wait_for(
                lambda evs: {p.workload_id for p in _started(evs)} == {"wl-short", "wl-long"},
                timeout=40,
                what=f"both started (agent log: {log})",
            )

            agent.send_signal(signal.SIGKILL)
            await asyncio.to_thread(agent.wait, 10)
            go_short.touch()  # it ends while no agent runs
            await eventually(
                lambda: asyncio.to_thread(_ended_meanwhile, tmp_path / "runs"),
                timeout=10,
                what="its exit file",
            )

            agent = _agent(isolation, tmp_path, log)
            events = await reader.wait_for(
                lambda evs: [p.workload_id for p in _exited(evs)] == ["wl-short"],
                timeout=40,
                what="the exit of the workload that ended meanwhile",
            )
            go_long.touch()
            events = await reader.wait_for(
                lambda evs: len(_exited(evs)) == 2, timeout=30, what="the adopted one's exit"
            )
            await asyncio.sleep(0.75)  # three more ticks: nothing is told twice
            events = await reader.poll()
    finally:
        go_short.touch()
        go_long.touch()
        if agent.poll() is None:
            agent.send_signal(signal.SIGTERM)
            await asyncio.to_thread(agent.wait, 15)
    exited = {p.workload_id: p for p in _exited(events)}
    assert len(_exited(events)) == 2, _exited(events)
    assert (exited["wl-short"].exit_reason, exited["wl-short"].exit_code) == ("failed", 5)
    assert (exited["wl-long"].exit_reason, exited["wl-long"].exit_code) == ("succeeded", 0)
    started = {p.workload_id: p.pid for p in _started(events)}
    for wid, go in (("wl-short", go_short), ("wl-long", go_long)):  # each started once: adopted, not again
        pids = _pids(go)
        assert pids == [str(started[wid])], (wid, pids, started)
