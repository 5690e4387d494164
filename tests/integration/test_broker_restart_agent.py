"""The node agent waits for a broker that is not there yet, and outlives one that comes back empty."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from libs.common.bus import create_producer
from libs.common.bus.generations import generations_of
from libs.common.bus.kafka import wait_for_broker
from libs.common.events import encode, envelop, topics
from libs.common.events.agent import WorkloadStartedV1
from libs.common.events.scheduler import AllocationItem, WorkloadPlacedV1
from libs.common.events.telemetry import SampleBatchV1
from libs.devkit.broker import EmbeddedBroker
from services.telemetry.adapters.sim.ids import gpu_uuid
from services.telemetry.service.agent import process
from services.telemetry.service.agent.process import NodeAgent, utc_now
from services.telemetry.service.agent.setup import simulated_setup
from services.telemetry.settings import TelemetrySettings
from tests.integration.support import Isolation, TopicReader, eventually
from tests.integration.telemetry.stack import FLEET


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    """A broker of this test's own, not started: each test starts (and kills) it."""
    own = EmbeddedBroker(log_path=tmp_path / "tansu.log")
    try:
        yield own
    finally:
        own.stop()


def _settings(iso: Isolation, tmp_path: Path, broker: EmbeddedBroker) -> TelemetrySettings:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET)
    return iso.settings(
        TelemetrySettings,
        "telemetry",
        kafka_bootstrap_servers=broker.bootstrap,
        agent_mode="simulated",
        fleet_file=fleet,
        sample_interval_s=0.5,
    )


async def _samples_arrive(settings: TelemetrySettings, broker: EmbeddedBroker) -> None:
    samples = generations_of(settings, topics.TELEMETRY_SAMPLES).pattern()
    async with TopicReader(bootstrap=broker.bootstrap, pattern=samples) as r:
        await r.wait_for(lambda ev: any(isinstance(p, SampleBatchV1) for _, p in ev), timeout=30)


async def _running(task: asyncio.Task[None], agent: NodeAgent, ticks: int) -> bool:
    if task.done():
        task.result()  # raises what stopped it
    return agent.ticks >= ticks


async def test_an_agent_started_before_its_broker_waits_for_it_and_then_publishes(
    isolation: Isolation, tmp_path: Path, broker: EmbeddedBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def wait_briefly(*, bootstrap: str, timeout_s: float = 30.0) -> None:
        await wait_for_broker(bootstrap=bootstrap, timeout_s=min(timeout_s, 1.0))

    monkeypatch.setattr(process, "wait_for_broker", wait_briefly)  # each wait gives up after a second
    settings = _settings(isolation, tmp_path, broker)
    agent = NodeAgent(settings=settings, setup=await simulated_setup(settings=settings, clock=utc_now))
    stop = asyncio.Event()
    task = asyncio.create_task(agent.run(stop))
    try:
        await asyncio.sleep(4.0)  # longer than one wait for the broker: the agent tries again
        assert not task.done(), "the agent must wait for its broker, not give up"
        broker.start()
        await eventually(lambda: _running(task, agent, 1), timeout=60, what="the agent's first tick")
        await _samples_arrive(settings, broker)
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=20)


async def test_an_agent_outlives_a_broker_restarted_empty_and_reads_the_placements_of_the_new_one(
    isolation: Isolation, tmp_path: Path, broker: EmbeddedBroker
) -> None:
    settings = _settings(isolation, tmp_path, broker)
    broker.start()
    agent = NodeAgent(settings=settings, setup=await simulated_setup(settings=settings, clock=utc_now))
    stop = asyncio.Event()
    task = asyncio.create_task(agent.run(stop))
    try:
        await eventually(lambda: _running(task, agent, 3), timeout=60, what="the agent ticking")
        broker.kill()
        await asyncio.sleep(3.0)
        assert not task.done(), "the agent must outlive its broker"
        broker.start()  # empty: no topics, no records, another cluster id

        placed = WorkloadPlacedV1(
            workload_id="w-after",
            tenant_id="acme",
            placement_id="p-after",
            node="tnode-a",
            allocations=[
                AllocationItem(gpu_uuid=gpu_uuid(hostname="tnode-a", index=0), units=Decimal(8), model="H100")
            ],
            kind="instance",
            profile="training",
        )
        async with TopicReader(
            bootstrap=broker.bootstrap, topic=settings.topic(topics.NODE_AGENT)
        ) as reports:
            await _publish(broker, settings.topic(topics.SCHEDULER), placed)
            await reports.wait_for(
                lambda ev: any(
                    isinstance(p, WorkloadStartedV1) and p.workload_id == "w-after" for _, p in ev
                ),
                timeout=60,
                what="the agent to run the placement published to the new broker",
            )
        await _samples_arrive(settings, broker)
        assert agent.new_brokers == 1
        assert not task.done()
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=20)


async def _publish(broker: EmbeddedBroker, topic: str, event: WorkloadPlacedV1) -> None:
    producer = create_producer(bootstrap=broker.bootstrap, client_id="test")
    await producer.start()
    try:
        envelope = envelop(event, source="test")
        await producer.send_and_wait(topic, value=encode(envelope), key=envelope.subject.encode())
    finally:
        await producer.stop()
