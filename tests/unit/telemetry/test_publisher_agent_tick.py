"""The agent's tick over a simulated fleet, publishing through the fake producer: no broker."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from aiokafka.errors import KafkaTimeoutError

from libs.common.bus.generations import generations_of
from libs.common.events import EVENT_TYPES, decode, topics
from libs.common.events.telemetry import SampleBatchV1
from services.telemetry.adapters.agent.publisher_fake import FakePublisher
from services.telemetry.service.agent.process import NodeAgent
from services.telemetry.service.agent.setup import simulated_setup
from services.telemetry.settings import TelemetrySettings

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
SETTINGS = TelemetrySettings(kafka_bootstrap_servers="kafka-test:9092", kafka_topic_prefix="u.")
SAMPLES = generations_of(SETTINGS, topics.TELEMETRY_SAMPLES).topic_at(T0.timestamp())  # the clock's


def clock() -> datetime:
    return T0


async def _agent() -> tuple[NodeAgent, FakePublisher]:
    fake = FakePublisher(partitions=SETTINGS.kafka_partitions)
    fake.open(bootstrap=SETTINGS.kafka_bootstrap_servers, client_id="unit")
    await fake.start()
    setup = await simulated_setup(settings=SETTINGS, clock=clock)  # two 8-GPU nodes
    return NodeAgent(settings=SETTINGS, setup=setup, clock=clock, publisher=fake), fake


async def test_a_tick_sends_one_sample_batch_per_node_keyed_by_host_and_waits_for_it() -> None:
    agent, fake = await _agent()

    await agent.tick()

    assert fake.in_flight == []  # the tick flushed what it sent
    hosts = [b"sim-node-0000", b"sim-node-0001"]
    assert [key for key, _ in fake.messages(SAMPLES)] == hosts
    for partition, messages in fake.delivered(SAMPLES).items():
        assert {fake.partition_for(SAMPLES, key) for key, _ in messages} == {partition}
    for key, value in fake.messages(SAMPLES):
        _, batch = decode(value, EVENT_TYPES)
        assert isinstance(batch, SampleBatchV1)
        assert (batch.node.encode(), batch.at, len(batch.samples)) == (key, T0, 8)


async def test_a_tick_whose_sends_are_not_acknowledged_fails_and_the_next_one_sends_afresh() -> None:
    agent, fake = await _agent()
    fake.fail_next_flush()

    with pytest.raises(KafkaTimeoutError):
        await agent.tick()
    assert fake.messages(SAMPLES) == []

    await agent.tick()
    assert len(fake.messages(SAMPLES)) == 2


async def test_samples_go_to_the_generation_of_the_agents_clock_which_it_creates_with_the_next() -> None:
    now = [T0]
    fake = FakePublisher(partitions=SETTINGS.kafka_partitions)
    fake.open(bootstrap=SETTINGS.kafka_bootstrap_servers, client_id="unit")
    await fake.start()
    setup = await simulated_setup(settings=SETTINGS, clock=lambda: now[0])
    agent = NodeAgent(settings=SETTINGS, setup=setup, clock=lambda: now[0], publisher=fake)
    generations = generations_of(SETTINGS, topics.TELEMETRY_SAMPLES)
    every_s = SETTINGS.kafka_generation_s
    first, second, third = (generations.topic_at(T0.timestamp() + n * every_s) for n in range(3))

    await agent.tick()
    await agent.tick()  # the same generation: nothing more to create
    now[0] = T0 + timedelta(seconds=SETTINGS.kafka_generation_s)
    await agent.tick()

    assert fake.created == [first, second, third]
    assert (len(fake.messages(first)), len(fake.messages(second))) == (4, 2)
    assert first == f"u.telemetry.samples.{int(T0.timestamp()) // 300 * 300}"
