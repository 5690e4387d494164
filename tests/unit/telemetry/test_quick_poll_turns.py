"""The agent's quick poll and its ticks take turns: a runner forgets reports only once acknowledged."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime
from decimal import Decimal

from aiokafka import TopicPartition

from libs.common.events import EVENT_TYPES, decode, encode, envelop, topics
from libs.common.events.agent import WorkloadStartedV1
from libs.common.events.scheduler import AllocationItem, RunSpec, WorkloadPlacedV1
from services.telemetry.adapters.agent.publisher_fake import FakePublisher
from services.telemetry.adapters.runner.exits import StopReason
from services.telemetry.adapters.runner.report import RunnerReport
from services.telemetry.service.agent.process import NodeAgent
from services.telemetry.service.agent.setup import simulated_setup
from services.telemetry.settings import TelemetrySettings

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
SETTINGS = TelemetrySettings(kafka_bootstrap_servers="kafka-test:9092", kafka_topic_prefix="t.")
AGENT_TOPIC = SETTINGS.topic(topics.NODE_AGENT)


class GatedPublisher(FakePublisher):
    """A fake producer whose acknowledgements wait for the test to open the gate."""

    def __init__(self) -> None:
        super().__init__(partitions=SETTINGS.kafka_partitions)
        self.gate = asyncio.Event()
        self.waiting = asyncio.Event()

    async def flush(self) -> None:
        if self.in_flight:
            self.waiting.set()
            await self.gate.wait()
        await super().flush()


class StartsRunner:
    """Reports each started workload once, from whichever poll comes first; checks at delivered() that
    every report it gave was acknowledged by the producer."""

    def __init__(self, out: GatedPublisher) -> None:
        self._out = out
        self._placed: list[str] = []
        self._given: list[str] = []
        self.violations: list[str] = []

    def start(self, *, workload_id: str, placement_id: str, **_: object) -> None:
        self._placed.append(workload_id)

    def stop(self, *, workload_id: str, reason: StopReason = "cancelled") -> bool:
        return False

    def migrate(self, *, workload_id: str, placement_id: str, **_: object) -> None:
        pass

    def set_profile(self, *, workload_id: str, profile: str) -> bool:
        return False

    def awaiting_start(self) -> bool:
        return len(self._given) < len(self._placed)

    def poll_starts(self, *, now: datetime) -> list[RunnerReport]:
        return self._reports(now)

    def poll(self, *, now: datetime) -> list[RunnerReport]:
        return self._reports(now)

    def _reports(self, now: datetime) -> list[RunnerReport]:
        new = [w for w in self._placed if w not in self._given]
        self._given += new
        return [RunnerReport(workload_id=w, event="started", at=now, placement_id=f"pl-{w}") for w in new]

    def delivered(self) -> None:
        acked = set()
        for _, value in self._out.messages(AGENT_TOPIC):
            event = decode(value, EVENT_TYPES)[1]
            if isinstance(event, WorkloadStartedV1):
                acked.add(event.workload_id)
        self.violations += [w for w in self._given if w not in acked]


def _placed(workload: str, gpu: str) -> bytes:
    event = WorkloadPlacedV1(
        workload_id=workload,
        tenant_id="acme",
        placement_id=f"pl-{workload}",
        node="sim-node-0000",
        allocations=[AllocationItem(gpu_uuid=gpu, units=Decimal(8), model="H100")],
        kind="job",
        run=RunSpec(command=["true"]),
    )
    return encode(envelop(event, source="test"))


async def test_a_tick_during_the_quick_polls_unacknowledged_send_neither_polls_nor_forgets_it() -> None:
    out = GatedPublisher()
    out.open(bootstrap=SETTINGS.kafka_bootstrap_servers, client_id="unit")
    await out.start()
    setup = await simulated_setup(settings=SETTINGS, clock=lambda: T0)
    runner = StartsRunner(out)
    agent = NodeAgent(settings=SETTINGS, setup=dataclasses.replace(setup, runner=runner), publisher=out)
    gpus = sorted(setup.gpus)
    tp = TopicPartition(SETTINGS.topic(topics.SCHEDULER), 0)
    agent.intake.apply(tp, offset=0, raw=_placed("wl-1", gpus[0]), live=True)
    stop = asyncio.Event()
    quick = asyncio.create_task(agent.quick_polls(stop))
    await asyncio.wait_for(out.waiting.wait(), timeout=5)  # the quick poll's start is in flight

    agent.intake.apply(tp, offset=1, raw=_placed("wl-2", gpus[1]), live=True)
    tick = asyncio.create_task(agent.tick())
    for _ in range(20):
        await asyncio.sleep(0)
    assert runner.awaiting_start()  # the tick has not polled wl-2 past the quick poll's send
    out.gate.set()
    await asyncio.wait_for(tick, timeout=5)
    stop.set()
    await asyncio.wait_for(quick, timeout=5)

    assert runner.violations == []
    started = [decode(v, EVENT_TYPES)[1] for _, v in out.messages(AGENT_TOPIC)]
    assert sorted(e.workload_id for e in started if isinstance(e, WorkloadStartedV1)) == ["wl-1", "wl-2"]
