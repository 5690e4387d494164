"""Issue 23, device actions: recovery acts on what the host did with the reboot it asked for.

The real recovery service on the real broker, Postgres and Redis. The first test plays the node agent
(tests/integration/hardening/test_recovery_health_check.py's stand-in) and answers the reboot with a
failure; the others run the real node agent in-process on a simulated node, whose reboot clears the XID 79
unless it was injected to survive it, and play only inventory.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from libs.common.bus.kafka import all_physical_topics, ensure_topics
from libs.common.events import envelop, topics
from libs.common.events.agent import HostActionDoneV1, HostActionRequestedV1
from libs.common.events.inventory import GpuHealthChangedV1
from libs.common.events.recovery import DrainRequestedV1, IncidentClosedV1, ReturnToServiceRequestedV1
from services.recovery.app import create_app
from services.recovery.settings import RecoverySettings
from services.telemetry.adapters.sim import FaultKind
from services.telemetry.adapters.sim.ids import gpu_uuid
from services.telemetry.service.agent.process import NodeAgent, utc_now
from services.telemetry.service.agent.setup import AgentSetup, simulated_setup
from services.telemetry.settings import TelemetrySettings
from tests.integration.bus_fixtures import publish
from tests.integration.hardening.test_recovery_health_check import (
    Events,
    _agent,
    _app,
    _of,
    _reader,
    _state,
    _xid_79_to_verifying,
)
from tests.integration.support import Isolation, TopicReader, eventually, running

pytestmark = pytest.mark.integration

NODE = "rnode-a"
FLEET = f"""
nodes:
  - hostname: {NODE}
    labels: {{zone: z1, region: r1, pool: training}}
    gpus:
      - {{model: H100-80GB-SXM, count: 2}}
"""
G0, G1 = gpu_uuid(hostname=NODE, index=0), gpu_uuid(hostname=NODE, index=1)


async def _handled(app: FastAPI, event_id: str) -> bool:
    """Whether recovery's main consumer has applied the event (its inbox row)."""
    query = "SELECT count(*) FROM inbox WHERE event_id = $1"
    return int(await app.state.runtime.pool.fetchval(query, event_id)) == 1


def _closed(events: Events) -> bool:
    return bool(_of(events, IncidentClosedV1))


async def test_a_reboot_the_host_reports_failed_escalates_at_once_and_keeps_the_gpus_out(
    isolation: Isolation,
) -> None:
    app = _app(isolation, deadline_s=60)
    prefix = isolation.topic_prefix
    # One reader for both topics: the recovery topic, and the agent topic the reboot is asked on.
    both = TopicReader(
        bootstrap=isolation.infra.kafka, topic=prefix + topics.RECOVERY, also=[prefix + topics.NODE_AGENT]
    )
    async with running(app) as client, both as r, _agent(isolation) as agent:
        incident = await _xid_79_to_verifying(app, agent, r)
        events = await r.wait_for(
            lambda evs: bool(_of(evs, HostActionRequestedV1)), timeout=15, what="the reboot asked for"
        )
        asked: HostActionRequestedV1 = _of(events, HostActionRequestedV1)[0]
        assert (asked.incident_id, asked.action, asked.node) == (incident, "reboot_node", "n1")
        failed = HostActionDoneV1(
            command_id=asked.command_id, incident_id=incident, node="n1", action="reboot_node",
            outcome="failed", reason="command exited 1", commands=[["systemctl", "reboot"]], exit_code=1,
            output="Failed to reboot: Access denied\nsee the journal\n",
        )  # fmt: skip
        await agent.send(topics.NODE_AGENT, failed)

        # Far before its deadline (60 s) and with no health check passed or failed: the failure decides.
        events = await r.wait_for(_closed, timeout=15, what="the incident closed")
        closed = _of(events, IncidentClosedV1)[0]
        assert (closed.incident_id, closed.outcome) == (incident, "escalated")
        assert closed.reason == (
            "reboot_node of node n1 failed (exit status 1): command exited 1; "
            "output: Failed to reboot: Access denied"
        )
        shown = await _state(client, incident)
        assert shown["state"] == "escalated"
        assert [(a["outcome"], a["commands"], a["exit_code"]) for a in shown["actions"]] == [
            ("failed", [["systemctl", "reboot"]], 1)
        ]
        # The GPUs stay out for a person: a success for the same command, redelivered late, changes nothing.
        late = envelop(failed.model_copy(update={"outcome": "succeeded", "exit_code": 0}), source="test")
        await publish(isolation, [late], topic=topics.NODE_AGENT)
        await eventually(lambda: _handled(app, late.id), timeout=15, what="the late report handled")
        assert _of(await r.poll(), ReturnToServiceRequestedV1) == []
        assert len((await _state(client, incident))["actions"]) == 1


@dataclass
class SimNode:
    """The real node agent on one simulated node (GPUs G0 and G1) and the fleet it plays."""

    agent: NodeAgent
    setup: AgentSetup


@contextlib.asynccontextmanager
async def _sim_node(iso: Isolation, tmp_path: Path) -> AsyncIterator[SimNode]:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET)
    settings = iso.settings(
        TelemetrySettings, "telemetry", agent_mode="simulated", fleet_file=fleet, sample_interval_s=0.2
    )
    await ensure_topics(bootstrap=iso.infra.kafka, topics=all_physical_topics(iso.topic_prefix), partitions=3)
    setup = await simulated_setup(settings=settings, clock=utc_now)
    agent = NodeAgent(settings=settings, setup=setup)
    stop = asyncio.Event()
    task = asyncio.create_task(agent.run(stop))
    try:
        yield SimNode(agent=agent, setup=setup)
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=15)


def _sim_app(iso: Isolation) -> FastAPI:
    # The deadline escalates a GPU still lost 2 s after the reboot was asked for (the progress grace).
    settings = iso.settings(
        RecoverySettings, "recovery", settle_s=0.5, tick_s=0.2, deadline_s=3, progress_grace_s=2,
        consume_samples=True,
    )  # fmt: skip
    return create_app(settings)


async def _xid_79_rebooted(iso: Isolation, node: SimNode, r: TopicReader, *, survives: bool) -> str:
    """XID 79 on G0 of the simulated node; inventory drains the node; returns the incident id."""
    assert node.setup.fleet is not None
    node.setup.fleet.inject_fault(
        gpu_uuid=G0, fault=FaultKind.XID, now=utc_now(), xid=79, survives_reset=survives
    )
    events = await r.wait_for(lambda evs: bool(_of(evs, DrainRequestedV1)), timeout=15, what="the drain")
    drain: DrainRequestedV1 = _of(events, DrainRequestedV1)[0]
    assert (drain.node, drain.gpu_uuid) == (NODE, None)  # XID 79: the node is rebooted
    drained = [
        GpuHealthChangedV1(gpu_uuid=g, node=NODE, previous="healthy", health="draining", reason="drain")
        for g in (G0, G1)
    ]
    await publish(iso, [envelop(e, source="test") for e in drained], topic=topics.INVENTORY)
    return drain.incident_id


async def _actions(client: httpx.AsyncClient, incident: str) -> list[dict[str, Any]]:
    actions: list[dict[str, Any]] = (await _state(client, incident))["actions"]
    return actions


async def _recorded(client: httpx.AsyncClient, incident: str) -> list[dict[str, Any]]:
    """The incident's device actions once the host's report is recorded (it may come after the close)."""
    return await eventually(lambda: _actions(client, incident), timeout=15, what="the host action recorded")


async def test_an_xid_79_that_survives_the_reboot_keeps_the_gpu_out_and_escalates(
    isolation: Isolation, tmp_path: Path
) -> None:
    async with (
        running(_sim_app(isolation)) as client,
        _reader(isolation) as r,
        _sim_node(isolation, tmp_path) as node,
    ):
        incident = await _xid_79_rebooted(isolation, node, r, survives=True)
        events = await r.wait_for(_closed, timeout=20, what="the incident closed")
        closed = _of(events, IncidentClosedV1)[0]
        assert (closed.incident_id, closed.outcome) == (incident, "escalated")
        assert f"GPU {G0} still reported lost after the reset or reboot" in closed.reason
        assert _of(events, ReturnToServiceRequestedV1) == []
        # The host did reboot, and said the GPU was still faulty: that is on the incident.
        actions = await _recorded(client, incident)
        assert [(a["action"], a["outcome"], a["exit_code"]) for a in actions] == [
            ("reboot_node", "succeeded", 0)
        ]
        assert G0 in actions[0]["output"]


async def test_a_gpu_the_reboot_brings_back_returns_to_service(isolation: Isolation, tmp_path: Path) -> None:
    async with (
        running(_sim_app(isolation)) as client,
        _reader(isolation) as r,
        _sim_node(isolation, tmp_path) as node,
    ):
        incident = await _xid_79_rebooted(isolation, node, r, survives=False)
        events = await r.wait_for(_closed, timeout=20, what="the incident closed")
        closed = _of(events, IncidentClosedV1)[0]
        assert (closed.incident_id, closed.outcome) == (incident, "recovered")
        assert {e.gpu_uuid for e in _of(events, ReturnToServiceRequestedV1)} == {G0, G1}
        actions = await _recorded(client, incident)
        assert [(a["action"], a["outcome"], a["output"]) for a in actions] == [
            ("reboot_node", "succeeded", "")
        ]
