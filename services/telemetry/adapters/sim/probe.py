"""SimProbe: one node of a SimFleet seen through the GpuProbe port."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from services.telemetry.adapters.sim.fleet import SimFleet
from services.telemetry.domain.metrics import GpuReading, XidEvent
from services.telemetry.domain.probe import NodeDiscovery

__all__ = ["SimProbe"]


class SimProbe:
    """GpuProbe over one simulated node; the clock is injected so tests control time."""

    def __init__(self, *, fleet: SimFleet, hostname: str, clock: Callable[[], datetime]) -> None:
        self._fleet = fleet
        self._hostname = hostname
        self._clock = clock
        self.closed = False

    async def discover(self) -> NodeDiscovery:
        return self._fleet.discovery(hostname=self._hostname)

    async def sample(self) -> list[GpuReading]:
        return self._fleet.sample_node(hostname=self._hostname, now=self._clock())

    async def sample_values(self) -> list[GpuReading | tuple[Any, ...]]:
        """sample() for the agent's fast path: values(gpu) tuples for GPUs that answer (see gpu.values)."""
        return self._fleet.sample_node_values(hostname=self._hostname, now=self._clock())

    async def poll_xids(self) -> list[XidEvent]:
        return self._fleet.poll_xids(hostname=self._hostname)

    async def close(self) -> None:
        self.closed = True
