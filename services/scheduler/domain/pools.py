"""Per-class accounting for the reserved-pool rule during one scheduling pass.

A class is one GPU model within one pool (the GPUs' `pool` label): the unit the rule judges contention
and the 80% cap on (see reserved.py for why).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from services.scheduler.domain.cluster import ClusterState, Grant
from services.scheduler.domain.reserved import PoolLoad, ReservedPoolConfig, is_high

__all__ = ["PoolBook", "PoolClass"]

PoolClass = tuple[str, str]  # (pool, GPU model)


class PoolBook:
    """Capacity, holdings and waiting demand per class, updated as the pass places work."""

    def __init__(self, *, state: ClusterState, config: ReservedPoolConfig) -> None:
        self._config = config
        self.class_of: dict[str, PoolClass] = {g.uuid: (g.pool, g.model) for g in state.gpus}
        self.capacity: dict[PoolClass, float] = defaultdict(float)
        for gpu in state.gpus:
            if gpu.healthy:
                self.capacity[(gpu.pool, gpu.model)] += gpu.units
        self.held: dict[PoolClass, float] = defaultdict(float)
        self.high_held: dict[PoolClass, float] = defaultdict(float)
        self.waiting: dict[PoolClass, float] = defaultdict(float)
        self.low_waiting: dict[PoolClass, float] = defaultdict(float)
        for alloc in state.allocations:
            self.hold(grants=alloc.grants, priority=alloc.priority)

    def wait(self, *, demand: Mapping[PoolClass, float], priority: float, sign: float = 1.0) -> None:
        """Count (or with sign -1, stop counting) a waiting workload's demand: units in each class it
        could run on (it competes for all of them, as the pass cannot know which it will get)."""
        low = not is_high(priority=priority, config=self._config)
        for cls, units in demand.items():
            self.waiting[cls] += sign * units
            if low:
                self.low_waiting[cls] += sign * units

    def hold(self, *, grants: Iterable[Grant], priority: float) -> None:
        """Count grants as held in their GPUs' classes."""
        high = is_high(priority=priority, config=self._config)
        for grant in grants:
            cls = self.class_of.get(grant.gpu)
            if cls is not None:
                self.held[cls] += grant.units
                if high:
                    self.high_held[cls] += grant.units

    def load(self, cls: PoolClass) -> PoolLoad:
        """The class's load now."""
        return PoolLoad(
            capacity=self.capacity.get(cls, 0.0),
            held=self.held.get(cls, 0.0),
            high_held=self.high_held.get(cls, 0.0),
            waiting=max(self.waiting.get(cls, 0.0), 0.0),
            low_waiting=max(self.low_waiting.get(cls, 0.0), 0.0),
        )
