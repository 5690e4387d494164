"""The node agent keeps what a failed flush may have lost and sends it again; samples it does not resend."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from aiokafka.errors import KafkaConnectionError

from libs.common.bus.generations import generations_of
from libs.common.events import EVENT_TYPES, decode, topics
from libs.common.events.agent import WorkloadStartedV1
from libs.common.events.scheduler import AllocationItem, WorkloadPlacedV1
from services.telemetry.adapters.agent.publisher_fake import FakePublisher
from services.telemetry.service.agent.process import NodeAgent
from services.telemetry.service.agent.setup import simulated_setup
from services.telemetry.settings import TelemetrySettings

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
SETTINGS = TelemetrySettings(kafka_bootstrap_servers="kafka-test:9092", kafka_topic_prefix="u.")
REPORTS = SETTINGS.topic(topics.NODE_AGENT)
SAMPLES = generations_of(SETTINGS, topics.TELEMETRY_SAMPLES).topic_at(T0.timestamp())  # the clock's


async def test_a_report_whose_flush_failed_is_sent_again_once_by_the_next_tick_with_the_same_id() -> None:
    fake = FakePublisher(partitions=SETTINGS.kafka_partitions)
    fake.open(bootstrap=SETTINGS.kafka_bootstrap_servers, client_id="unit")
    await fake.start()
    now = [T0]
    setup = await simulated_setup(settings=SETTINGS, clock=lambda: now[0])
    agent = NodeAgent(settings=SETTINGS, setup=setup, clock=lambda: now[0], publisher=fake)
    placed = WorkloadPlacedV1(
        workload_id="w1",
        tenant_id="acme",
        placement_id="p1",
        node="sim-node-0000",
        allocations=[AllocationItem(gpu_uuid=sorted(setup.gpus)[0], units=Decimal(8), model="H100")],
        kind="job",
        profile="interactive",
        duration_s=600.0,
    )
    agent.book.apply(placed, at=T0)

    now[0] += timedelta(seconds=10)  # the workload has started by then
    fake.fail_next_flush(KafkaConnectionError("the broker went away"))
    with pytest.raises(KafkaConnectionError):
        await agent.tick()  # the report of the start is lost with the flush
    assert fake.messages(REPORTS) == []

    for _ in range(2):
        now[0] += timedelta(seconds=1)
        await agent.tick()
    sent = [decode(value, EVENT_TYPES) for _, value in fake.messages(REPORTS)]
    started = [envelope.id for envelope, event in sent if isinstance(event, WorkloadStartedV1)]
    assert len(started) == 1  # sent again once, not by every later tick
    assert len(fake.messages(SAMPLES)) == 2 * len(setup.probes)  # the failed tick's samples are not resent
