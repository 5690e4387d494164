"""An in-memory twin of PlacementStore for unit tests: the placement map and GPU health, no database."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from services.recovery.domain.placements import Placement

__all__ = ["FakePlacementStore"]


class FakePlacementStore:
    """Placements by workload and GPU health by GPU, answered as PlacementStore answers them."""

    def __init__(self) -> None:
        self.placements: dict[str, Placement] = {}
        self.priorities: dict[str, float] = {}
        self.health: dict[str, tuple[str, str]] = {}  # gpu -> (node, health)

    async def place(self, p: Placement, *, priority: float) -> None:
        """Record where a workload runs now (a new placement replaces the old one)."""
        self.placements[p.workload_id] = p
        self.priorities[p.workload_id] = priority

    async def move(self, *, workload_id: str, placement_id: str, gpus: Sequence[str]) -> Placement | None:
        """Record the GPUs a workload's current placement holds now; None (nothing changed) when that
        placement is not its current one."""
        current = self.placements.get(workload_id)
        if current is None or current.placement_id != placement_id:
            return None
        self.placements[workload_id] = replace(current, gpus=tuple(gpus))
        return self.placements[workload_id]

    async def end(self, *, workload_id: str, placement_id: str) -> None:
        """Forget a placement that ended, unless the workload already has a newer one."""
        current = self.placements.get(workload_id)
        if current is not None and current.placement_id == placement_id:
            del self.placements[workload_id]
            del self.priorities[workload_id]

    async def on_gpu(self, gpu: str) -> list[Placement]:
        """Workloads holding a GPU, by workload id."""
        return [p for _, p in sorted(self.placements.items()) if gpu in p.gpus]

    async def on_node(self, node: str) -> list[Placement]:
        """Workloads placed on a node, by workload id."""
        return [p for _, p in sorted(self.placements.items()) if p.node == node]

    async def of(self, workload_ids: Sequence[str]) -> dict[str, Placement]:
        """Current placements of the given workloads, by workload id."""
        return {w: self.placements[w] for w in workload_ids if w in self.placements}

    async def set_health(self, *, gpu: str, node: str, health: str) -> None:
        """Record a GPU's health as inventory reported it."""
        self.health[gpu] = (node, health)

    async def health_of(self, gpus: Sequence[str]) -> dict[str, str]:
        """Health of the given GPUs (GPUs never reported are left out)."""
        return {gpu: self.health[gpu][1] for gpu in gpus if gpu in self.health}

    async def out_of_service_on_node(self, node: str) -> list[str]:
        """GPUs of a node last reported draining or failed, by GPU id."""
        return sorted(g for g, (n, h) in self.health.items() if n == node and h in ("draining", "failed"))
