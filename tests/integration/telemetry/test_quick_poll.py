"""The agent's quick poll and the runner's launcher, with real supervisors and processes (no broker:
the agent publishes through the fake producer, and records are applied to its intake directly)."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import signal
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pytest
from aiokafka import TopicPartition

from libs.common.bus.generations import generations_of
from libs.common.events import EVENT_TYPES, decode, encode, envelop, topics
from libs.common.events.agent import WorkloadExitedV1, WorkloadStartedV1
from libs.common.events.scheduler import AllocationItem, RunSpec, WorkloadEndedV1, WorkloadPlacedV1
from services.telemetry.adapters.agent.publisher_fake import FakePublisher
from services.telemetry.adapters.runner import files, process
from services.telemetry.adapters.runner.process import ProcessRunner
from services.telemetry.adapters.runner.report import RunnerReport
from services.telemetry.adapters.runner.supervise import Supervisor
from services.telemetry.service.agent.process import NodeAgent, utc_now
from services.telemetry.service.agent.setup import simulated_setup
from services.telemetry.settings import TelemetrySettings
from tests.integration.telemetry.runs import until_reported

SETTINGS = TelemetrySettings(kafka_bootstrap_servers="kafka-test:9092", kafka_topic_prefix="q.")
SCHEDULER = TopicPartition(SETTINGS.topic(topics.SCHEDULER), 0)
AGENT_TOPIC = SETTINGS.topic(topics.NODE_AGENT)
SAMPLES = re.compile(generations_of(SETTINGS, topics.TELEMETRY_SAMPLES).pattern())  # every generation


def _runner(root: Path) -> ProcessRunner:
    return ProcessRunner(root=root, card_memory={}, log_quota_bytes=1 << 20, environ=dict(os.environ))


async def _agent(root: Path) -> tuple[NodeAgent, FakePublisher, str]:
    fake = FakePublisher(partitions=SETTINGS.kafka_partitions)
    fake.open(bootstrap=SETTINGS.kafka_bootstrap_servers, client_id="quick")
    await fake.start()
    setup = await simulated_setup(settings=SETTINGS, clock=utc_now)
    setup = dataclasses.replace(setup, runner=_runner(root))
    return NodeAgent(settings=SETTINGS, setup=setup, publisher=fake), fake, sorted(setup.gpus)[0]


def _placed(workload: str, gpu: str, *command: str) -> bytes:
    event = WorkloadPlacedV1(
        workload_id=workload,
        tenant_id="acme",
        placement_id=f"pl-{workload}",
        node="sim-node-0000",
        allocations=[AllocationItem(gpu_uuid=gpu, units=Decimal(8), model="H100")],
        kind="job",
        run=RunSpec(command=list(command), grace_s=1),
    )
    return encode(envelop(event, source="test"))


def _ended(workload: str) -> bytes:
    event = WorkloadEndedV1(
        workload_id=workload, tenant_id="acme", placement_id=f"pl-{workload}", outcome="cancelled"
    )
    return encode(envelop(event, source="test"))


def _told(fake: FakePublisher) -> list[WorkloadStartedV1 | WorkloadExitedV1]:
    events = [decode(value, EVENT_TYPES)[1] for _, value in fake.messages(AGENT_TOPIC)]
    return [e for e in events if isinstance(e, WorkloadStartedV1 | WorkloadExitedV1)]


async def _quick_polls_until(agent: NodeAgent, done: Callable[[], bool], *, timeout: float = 10.0) -> None:
    stop = asyncio.Event()
    task = asyncio.create_task(agent.quick_polls(stop))
    try:
        deadline = time.monotonic() + timeout
        while not done():
            assert time.monotonic() < deadline, "not done within the deadline"
            await asyncio.sleep(0.01)
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=5)


async def test_a_placed_workload_is_launched_and_its_start_acknowledged_without_a_sample_tick(
    root: Path,
) -> None:
    agent, fake, gpu = await _agent(root)
    agent.intake.apply(SCHEDULER, offset=0, raw=_placed("wl-quick", gpu, "sleep", "30"), live=True)

    await _quick_polls_until(agent, lambda: bool(_told(fake)))

    (started,) = _told(fake)
    assert isinstance(started, WorkloadStartedV1)
    assert (started.workload_id, started.runner) == ("wl-quick", "process")
    assert started.pid is not None
    assert files.process_start(started.pid) is not None
    assert fake.topics() == [AGENT_TOPIC]  # its report only: no tick ran, no samples
    assert not any(SAMPLES.match(topic) for topic in fake.topics())
    run = root / files.run_dir_name(workload_id="wl-quick", placement_id="pl-wl-quick")
    assert files.read_json(run / files.REPORTED) == {"started": True, "exit": False}


async def test_a_placement_ended_in_the_same_batch_is_never_launched_by_the_quick_poll(root: Path) -> None:
    agent, fake, gpu = await _agent(root)
    # As in a replay of the scheduler topic: placed and ended back to back, then another placement.
    agent.intake.apply(SCHEDULER, offset=0, raw=_placed("wl-old", gpu, "sleep", "30"), live=False)
    agent.intake.apply(SCHEDULER, offset=1, raw=_ended("wl-old"), live=False)
    agent.intake.apply(SCHEDULER, offset=2, raw=_placed("wl-new", gpu, "sleep", "30"), live=True)

    await _quick_polls_until(agent, lambda: bool(_told(fake)))

    assert [(e.workload_id, type(e).__name__) for e in _told(fake)] == [("wl-new", "WorkloadStartedV1")]
    assert not (root / files.run_dir_name(workload_id="wl-old", placement_id="pl-wl-old")).exists()


def _ppid(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def test_a_killed_launcher_is_replaced_and_the_supervisors_it_forked_carry_on(root: Path) -> None:
    runner = _runner(root)
    _start(runner, "wl-a", gpu="GPU-a", command=["sleep", "30"])
    _until(runner, lambda seen: any(r.event == "started" for r in seen))
    sup = files.read_json(
        root / files.run_dir_name(workload_id="wl-a", placement_id="pl-wl-a") / files.SUPERVISOR
    )
    assert sup is not None
    launcher = _ppid(int(sup["pid"]))
    os.kill(launcher, signal.SIGKILL)

    _start(runner, "wl-b", gpu="GPU-b", command=["sh", "-c", "exit 4"])
    seen = _until(runner, lambda seen: any(r.workload_id == "wl-b" and r.event == "failed" for r in seen))
    assert [r.exit_code for r in seen if r.workload_id == "wl-b" and r.event == "failed"] == [4]
    assert files.process_start(int(sup["pid"])) == sup["start"]  # wl-a's supervisor still runs

    assert runner.stop(workload_id="wl-a") is True
    seen = _until(runner, lambda seen: any(r.workload_id == "wl-a" for r in seen))
    assert [(r.event, r.exit_reason) for r in seen if r.workload_id == "wl-a"] == [("failed", "cancelled")]


def test_a_launch_line_that_died_unread_with_its_launcher_is_given_again(root: Path) -> None:
    runner = _runner(root)
    _start(runner, "wl-a", gpu="GPU-a", command=["sleep", "30"])
    _until(runner, lambda seen: any(r.event == "started" for r in seen))
    sup = files.read_json(
        root / files.run_dir_name(workload_id="wl-a", placement_id="pl-wl-a") / files.SUPERVISOR
    )
    assert sup is not None
    launcher = _ppid(int(sup["pid"]))
    os.kill(launcher, signal.SIGSTOP)  # it reads no more: the next line waits in the pipe

    _start(runner, "wl-b", gpu="GPU-b", command=["sh", "-c", "exit 4"])
    assert runner.poll(now=utc_now()) == []  # wl-b's line is written, and not read
    b_dir = root / files.run_dir_name(workload_id="wl-b", placement_id="pl-wl-b")
    assert not (b_dir / files.CLAIM).exists()
    os.kill(launcher, signal.SIGKILL)  # the line dies with it

    seen = _until(runner, lambda seen: any(r.workload_id == "wl-b" and r.event == "failed" for r in seen))
    assert [r.exit_code for r in seen if r.workload_id == "wl-b" and r.event == "failed"] == [4]
    assert runner.stop(workload_id="wl-a") is True
    _until(runner, lambda seen: any(r.workload_id == "wl-a" for r in seen))


def test_a_second_supervisor_of_a_claimed_run_ends_and_touches_nothing(root: Path) -> None:
    runner = _runner(root)
    _start(runner, "wl-a", gpu="GPU-a", command=["sh", "-c", "echo once >> ran.txt"])
    seen = _until(runner, lambda seen: any(r.event == "finished" for r in seen))
    run_dir = root / files.run_dir_name(workload_id="wl-a", placement_id="pl-wl-a")
    assert [r.event for r in seen if r.workload_id == "wl-a"] == ["started", "finished"]
    kept = {name: (run_dir / name).read_text() for name in (files.SUPERVISOR, files.STARTED, files.EXIT)}
    spec = files.read_json(run_dir / files.SPEC)
    assert spec is not None

    assert Supervisor(run_dir, spec).run() == 0  # as if its launch line had been given twice

    assert {name: (run_dir / name).read_text() for name in kept} == kept  # the first one's, as they were
    assert (run_dir / "ran.txt").read_text() == "once\n"
    assert runner.poll(now=utc_now()) == []  # nothing more to tell


def test_a_supervisor_that_comes_up_after_its_run_was_given_up_runs_nothing(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(process, "LAUNCH_TIMEOUT_S", 0.5)
    runner = _runner(root)
    _start(runner, "wl-a", gpu="GPU-a", command=["sleep", "30"])
    _until(runner, lambda seen: any(r.event == "started" for r in seen))
    a_dir = root / files.run_dir_name(workload_id="wl-a", placement_id="pl-wl-a")
    sup = files.read_json(a_dir / files.SUPERVISOR)
    assert sup is not None
    launcher = _ppid(int(sup["pid"]))
    os.kill(launcher, signal.SIGSTOP)  # stuck: wl-b's line waits unread past the launch bound

    _start(runner, "wl-b", gpu="GPU-b", command=["sh", "-c", "echo ran > ran.txt"])
    seen = _until(runner, lambda seen: any(r.workload_id == "wl-b" and r.event == "failed" for r in seen))
    assert [r.reason for r in seen if r.workload_id == "wl-b"] == [
        "its supervisor never started; the workload was killed"
    ]
    os.kill(launcher, signal.SIGCONT)  # it reads the line now, and forks wl-b's supervisor late

    b_dir = root / files.run_dir_name(workload_id="wl-b", placement_id="pl-wl-b")
    log = b_dir / "supervisor.log"
    deadline = time.monotonic() + 10
    while "the run is claimed" not in (log.read_text() if log.exists() else ""):
        assert time.monotonic() < deadline, "the late supervisor never said it found the run claimed"
        time.sleep(0.05)
    assert not (b_dir / "ran.txt").exists()
    assert not (b_dir / files.STARTED).exists()
    assert runner.stop(workload_id="wl-a") is True
    _until(runner, lambda seen: any(r.workload_id == "wl-a" for r in seen))


def _until(runner: ProcessRunner, done: Callable[[list[RunnerReport]], bool]) -> list[RunnerReport]:
    return until_reported(runner, done, timeout=10.0)


def _start(runner: ProcessRunner, workload: str, *, gpu: str, command: list[str]) -> None:
    runner.start(
        workload_id=workload,
        tenant_id="acme",
        placement_id=f"pl-{workload}",
        gpu_uuids=[gpu],
        allocations=[AllocationItem(gpu_uuid=gpu, units=Decimal(8), model="H100")],
        profile="training",
        duration_s=None,
        run=RunSpec(command=command, grace_s=1),
        at=utc_now(),
    )
