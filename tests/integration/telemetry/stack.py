"""A running telemetry stack for tests: the aggregator app and an in-process simulated agent."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from services.telemetry.app import create_app
from services.telemetry.service.agent.process import NodeAgent, utc_now
from services.telemetry.service.agent.setup import AgentSetup, simulated_setup
from services.telemetry.settings import TelemetrySettings
from tests.integration.support import Isolation, running

FLEET = """
nodes:
  - hostname: tnode-a
    labels: {zone: z1, region: r1, pool: training, edge: false}
    gpus:
      - {model: H100-80GB-SXM, count: 4}
  - hostname: tnode-b
    labels: {zone: z1, region: r1, pool: inference}
    gpus:
      - {model: L4, count: 2}
"""
GPUS_IN_FLEET = 6


@dataclass
class Stack:
    """What a test talks to."""

    client: httpx.AsyncClient
    agent: NodeAgent
    setup: AgentSetup
    settings: TelemetrySettings


@contextlib.asynccontextmanager
async def telemetry_stack(iso: Isolation, tmp_path: Path, **overrides: object) -> AsyncIterator[Stack]:
    """Start the aggregator (2 s rollups) and a simulated two-node agent; stop both after."""
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET)
    values: dict[str, object] = {
        "rollup_interval_s": 2.0,
        "rollup_grace_s": 0.5,
        "agent_mode": "simulated",
        "fleet_file": fleet,
        "sample_interval_s": 1.0,
        "stream_refresh_s": 0.2,
        "allocation_refresh_s": 0.2,
    } | overrides
    settings = iso.settings(TelemetrySettings, "telemetry", **values)
    async with running(create_app(settings)) as client:
        setup = await simulated_setup(settings=settings, clock=utc_now)
        agent = NodeAgent(settings=settings, setup=setup)
        stop = asyncio.Event()
        task = asyncio.create_task(agent.run(stop))
        try:
            yield Stack(client=client, agent=agent, setup=setup, settings=settings)
        finally:
            stop.set()
            await asyncio.wait_for(task, timeout=15)
