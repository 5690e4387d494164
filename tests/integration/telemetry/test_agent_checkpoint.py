"""The node agent's checkpoint against the real broker: a restart resumes where the agent stopped."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import datetime
from decimal import Decimal
from pathlib import Path

from aiokafka import TopicPartition

from libs.common.bus.kafka import all_physical_topics, ensure_topics
from libs.common.events import Envelope, Event, encode, envelop, topics
from libs.common.events.agent import WorkloadExitedV1, WorkloadStartedV1
from libs.common.events.scheduler import AllocationItem, WorkloadEndedV1, WorkloadPlacedV1
from services.telemetry.adapters.agent import checkpoint as ck
from services.telemetry.adapters.sim.ids import gpu_uuid
from services.telemetry.service.agent.process import NodeAgent, utc_now
from services.telemetry.service.agent.setup import simulated_setup
from services.telemetry.settings import TelemetrySettings
from tests.integration.bus_fixtures import publish
from tests.integration.support import Isolation, TopicReader, eventually
from tests.integration.telemetry.stack import FLEET

A0 = gpu_uuid(hostname="tnode-a", index=0)
A1 = gpu_uuid(hostname="tnode-a", index=1)
B0 = gpu_uuid(hostname="tnode-b", index=0)
OTHER_NODES = 150  # placements on nodes this agent does not read, published while it is down


def _settings(iso: Isolation, tmp_path: Path, *, state_dir: Path | None) -> TelemetrySettings:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET)
    return iso.settings(
        TelemetrySettings,
        "telemetry",
        agent_mode="simulated",
        fleet_file=fleet,
        sample_interval_s=0.5,
        sim_speed=5.0,
        agent_state_dir=state_dir,
    )


def _placed(workload: str, gpu: str, placement: str, *, node: str) -> Envelope:
    event = WorkloadPlacedV1(
        workload_id=workload,
        tenant_id="acme",
        placement_id=placement,
        node=node,
        allocations=[AllocationItem(gpu_uuid=gpu, units=Decimal(8), model="H100")],
        kind="instance",
        profile="training",
    )
    return envelop(event, source="test")


def _ended(workload: str, placement: str) -> Envelope:
    event = WorkloadEndedV1(
        workload_id=workload, tenant_id="acme", placement_id=placement, outcome="cancelled"
    )
    return envelop(event, source="test")


@contextlib.asynccontextmanager
async def _agent(settings: TelemetrySettings) -> AsyncIterator[NodeAgent]:
    """A running agent, yielded once it has caught up and ticked; stopped cleanly after."""
    agent = NodeAgent(settings=settings, setup=await simulated_setup(settings=settings, clock=utc_now))
    stop = asyncio.Event()
    task = asyncio.create_task(agent.run(stop))

    async def ticked() -> bool:
        if task.done():
            task.result()  # raises what stopped it
        return agent.ticks >= 1

    try:
        await eventually(ticked, timeout=60, interval=0.1, what="the agent's first tick")
        yield agent
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=15)


async def _reports_of(reader: TopicReader, *, since: datetime, expect: set[str]) -> set[tuple[str, str, str]]:
    """(report, workload, placement) of the Started/Exited reports sent since an agent started, once
    every workload in expect has started (again) in it."""

    def reports(events: list[tuple[Envelope, Event]]) -> list[WorkloadStartedV1 | WorkloadExitedV1]:
        return [
            p for e, p in events if isinstance(p, WorkloadStartedV1 | WorkloadExitedV1) and e.time >= since
        ]

    def started(events: list[tuple[Envelope, Event]]) -> bool:
        return expect <= {p.workload_id for p in reports(events) if isinstance(p, WorkloadStartedV1)}

    events = await reader.wait_for(started, timeout=30, what=f"{sorted(expect)} started")
    return {(type(p).__name__, p.workload_id, p.placement_id) for p in reports(events)}


async def _origin(settings: TelemetrySettings) -> ck.Origin:
    setup = await simulated_setup(settings=settings, clock=utc_now)
    return ck.Origin.of(
        bootstrap=settings.kafka_bootstrap_servers, topic_prefix=settings.kafka_topic_prefix, gpus=setup.gpus
    )


async def _prepare(iso: Isolation) -> None:
    await ensure_topics(bootstrap=iso.infra.kafka, topics=all_physical_topics(iso.topic_prefix), partitions=3)


async def test_a_restarted_agent_resumes_from_its_checkpoint_with_the_book_and_reports_of_a_full_replay(
    isolation: Isolation, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    with_state = _settings(isolation, tmp_path, state_dir=state)
    await _prepare(isolation)
    await publish(
        isolation,
        [_placed("wl-a", A0, "pl-a", node="tnode-a"), _placed("wl-b", A1, "pl-b", node="tnode-a")],
        topic=topics.SCHEDULER,
    )
    async with TopicReader(
        bootstrap=isolation.infra.kafka, topic=with_state.topic(topics.NODE_AGENT)
    ) as reader:
        since = utc_now()
        async with _agent(with_state) as first:
            assert set(first.book.allocations()) == {A0, A1}
            await _reports_of(reader, since=since, expect={"wl-a", "wl-b"})
        saved = ck.load_checkpoint(state / ck.FILE_NAME, expect=await _origin(with_state))
        assert saved is not None
        assert len(saved.records) == 2

        others = [
            _placed(f"wl-x{i}", f"GPU-x-{i}", f"pl-x{i}", node=f"xnode-{i}") for i in range(OTHER_NODES)
        ]
        later = [_ended("wl-b", "pl-b"), _placed("wl-d", B0, "pl-d", node="tnode-b")]
        await publish(isolation, [*others, *later], topic=topics.SCHEDULER)

        since = utc_now()
        async with _agent(with_state) as resumed:
            assert resumed.intake.refused is None
            assert resumed.intake.restored == 2
            # It read on from where it stopped (a partition it had read nothing from, from its start).
            saved_next = {tp: p.next_offset for tp, p in saved.positions.items()}
            first_reads = resumed.intake.first_offsets
            assert first_reads == {tp: saved_next.get(tp, 0) for tp in first_reads}
            saved_scheduler_partitions = sum(
                1 for tp in saved_next if tp.topic == with_state.topic(topics.SCHEDULER)
            )
            assert saved_scheduler_partitions >= 1
            assert resumed.book.allocations() == {A0: ("wl-a", "acme"), B0: ("wl-d", "acme")}
            resumed_reports = await _reports_of(reader, since=since, expect={"wl-a", "wl-d"})

        since = utc_now()
        async with _agent(_settings(isolation, tmp_path, state_dir=None)) as replayed:
            scheduler_partitions = {
                tp for tp in replayed.intake.first_offsets if tp.topic.endswith(topics.SCHEDULER)
            }
            assert {replayed.intake.first_offsets[tp] for tp in scheduler_partitions} == {0}
            assert replayed.book.allocations() == resumed.book.allocations()
            replayed_reports = await _reports_of(reader, since=since, expect={"wl-a", "wl-d"})

    assert (
        resumed_reports
        == replayed_reports
        == {
            ("WorkloadStartedV1", "wl-a", "pl-a"),
            ("WorkloadStartedV1", "wl-d", "pl-d"),
        }
    )


async def test_a_checkpoint_past_the_topics_end_is_refused_and_the_agent_replays_from_the_beginning(
    isolation: Isolation, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    settings = _settings(isolation, tmp_path, state_dir=state)
    await _prepare(isolation)
    await publish(isolation, [_placed("wl-a", A0, "pl-a", node="tnode-a")], topic=topics.SCHEDULER)
    origin = await _origin(settings)
    ghost = encode(_placed("wl-ghost", A1, "pl-ghost", node="tnode-a"))
    positions = {
        TopicPartition(settings.topic(topics.SCHEDULER), p): ck.Position(10_000, "0" * 32) for p in range(3)
    }
    ck.write_atomically(
        state / ck.FILE_NAME, ck.encode_checkpoint(ck.Checkpoint(origin, positions, records=(ghost,)))
    )

    async with _agent(settings) as agent:
        assert agent.intake.refused is not None
        assert "outside" in agent.intake.refused
        assert agent.intake.restored == 0
        assert agent.book.allocations() == {A0: ("wl-a", "acme")}
    rewritten = ck.load_checkpoint(state / ck.FILE_NAME, expect=origin)
    assert rewritten is not None
    assert len(rewritten.records) == 1
    assert b"wl-a" in rewritten.records[0]
    assert all(p.next_offset < 10_000 for p in rewritten.positions.values())
