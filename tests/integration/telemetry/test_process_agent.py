"""The node agent with TELEMETRY_AGENT_RUNNER=process against the real broker: placed events that carry
a run spec become real processes, and their start and exit reach the agent topic."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from pathlib import Path

from libs.common.bus.kafka import all_physical_topics, ensure_topics
from libs.common.events import Envelope, Event, envelop, topics
from libs.common.events.agent import WorkloadExitedV1, WorkloadStartedV1
from libs.common.events.scheduler import AllocationItem, RunSpec, WorkloadEndedV1, WorkloadPlacedV1
from services.telemetry.adapters.runner.process import ProcessRunner
from services.telemetry.adapters.sim.ids import gpu_uuid
from services.telemetry.service.agent.process import NodeAgent, utc_now
from services.telemetry.service.agent.setup import resolve_setup
from services.telemetry.settings import TelemetrySettings
from tests.integration.bus_fixtures import publish
from tests.integration.support import Isolation, TopicReader
from tests.integration.telemetry.stack import FLEET

A0 = gpu_uuid(hostname="tnode-a", index=0)
A1 = gpu_uuid(hostname="tnode-a", index=1)


def _placed(workload: str, gpu: str, *command: str) -> Envelope:
    event = WorkloadPlacedV1(
        workload_id=workload,
        tenant_id="acme",
        placement_id=f"pl-{workload}",
        node="tnode-a",
        allocations=[AllocationItem(gpu_uuid=gpu, units=Decimal(8), model="H100")],
        kind="job",
        run=RunSpec(command=list(command), grace_s=2),
    )
    return envelop(event, source="test")


def _host_reports(events: list[tuple[Envelope, Event]]) -> list[WorkloadStartedV1 | WorkloadExitedV1]:
    return [p for _, p in events if isinstance(p, WorkloadStartedV1 | WorkloadExitedV1)]


async def test_a_placed_run_spec_runs_as_a_process_whose_pid_and_exit_code_reach_the_agent_topic(
    isolation: Isolation, tmp_path: Path
) -> None:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET)
    settings = isolation.settings(
        TelemetrySettings,
        "telemetry",
        agent_mode="simulated",
        agent_runner="process",
        fleet_file=fleet,
        sample_interval_s=0.5,
        agent_workload_dir=tmp_path / "runs",
    )
    await ensure_topics(
        bootstrap=isolation.infra.kafka, topics=all_physical_topics(isolation.topic_prefix), partitions=3
    )
    setup = await resolve_setup(settings=settings, clock=utc_now)
    assert isinstance(setup.runner, ProcessRunner)
    agent = NodeAgent(settings=settings, setup=setup)
    stop = asyncio.Event()
    task = asyncio.create_task(agent.run(stop))
    try:
        async with TopicReader(
            bootstrap=isolation.infra.kafka, topic=settings.topic(topics.NODE_AGENT)
        ) as reader:
            await publish(
                isolation,
                [_placed("wl-exit", A0, "sh", "-c", "exit 7"), _placed("wl-long", A1, "sleep", "30")],
                topic=topics.SCHEDULER,
            )

            def both_started(events: list[tuple[Envelope, Event]]) -> bool:
                started = {p.workload_id for p in _host_reports(events) if isinstance(p, WorkloadStartedV1)}
                return started == {"wl-exit", "wl-long"}

            events = await reader.wait_for(both_started, timeout=30, what="both workloads started")
            cancel = WorkloadEndedV1(
                workload_id="wl-long", tenant_id="acme", placement_id="pl-wl-long", outcome="cancelled"
            )
            await publish(isolation, [envelop(cancel, source="test")], topic=topics.SCHEDULER)

            def both_exited(events: list[tuple[Envelope, Event]]) -> bool:
                return len([p for p in _host_reports(events) if isinstance(p, WorkloadExitedV1)]) == 2

            events = await reader.wait_for(both_exited, timeout=30, what="both workloads exited")
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=15)
    reports = _host_reports(events)
    started = {p.workload_id: p for p in reports if isinstance(p, WorkloadStartedV1)}
    exited = {p.workload_id: p for p in reports if isinstance(p, WorkloadExitedV1)}
    assert all(s.pid is not None and s.runner == "process" for s in started.values())
    assert (exited["wl-exit"].outcome, exited["wl-exit"].exit_reason, exited["wl-exit"].exit_code) == (
        "failed",
        "failed",
        7,
    )
    assert (exited["wl-long"].exit_reason, exited["wl-long"].signal) == ("cancelled", 15)
    assert len(reports) == 4  # each told once
