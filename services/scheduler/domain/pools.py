"""Per-pool accounting for the reserved-pool rule during one scheduling pass."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from services.scheduler.domain.cluster import ClusterState, Grant
from services.scheduler.domain.reserved import PoolLoad, ReservedPoolConfig, is_high

__all__ = ["PoolBook"]


class PoolBook:
    """Capacity, holdings and waiting demand per pool, updated as the pass places work."""

    def __init__(self, *, state: ClusterState, config: ReservedPoolConfig) -> None:
        self._config = config
        self.pool_of: dict[str, str] = {g.uuid: g.pool for g in state.gpus}
        self.capacity: dict[str, float] = defaultdict(float)
        for gpu in state.gpus:
            if gpu.healthy:
                self.capacity[gpu.pool] += gpu.units
        self.held: dict[str, float] = defaultdict(float)
        self.high_held: dict[str, float] = defaultdict(float)
        self.waiting: dict[str, float] = defaultdict(float)
        self.low_waiting: dict[str, float] = defaultdict(float)
        for alloc in state.allocations:
            self.hold(grants=alloc.grants, priority=alloc.priority)

    def pools_for(self, constraints: Mapping[str, str]) -> tuple[str, ...]:
        """Pools a workload with these constraints competes for."""
        wanted = constraints.get("pool")
        return (wanted,) if wanted is not None else tuple(self.capacity)

    def wait(self, *, pools: Iterable[str], units: float, priority: float, sign: float = 1.0) -> None:
        """Count (or with sign -1, stop counting) a waiting workload's demand in each pool it could use."""
        low = not is_high(priority=priority, config=self._config)
        for pool in pools:
            self.waiting[pool] += sign * units
            if low:
                self.low_waiting[pool] += sign * units

    def hold(self, *, grants: Iterable[Grant], priority: float) -> None:
        """Count grants as held in their GPUs' pools."""
        high = is_high(priority=priority, config=self._config)
        for grant in grants:
            pool = self.pool_of.get(grant.gpu)
            if pool is not None:
                self.held[pool] += grant.units
                if high:
                    self.high_held[pool] += grant.units

    def load(self, pool: str) -> PoolLoad:
        """The pool's load now."""
        return PoolLoad(
            capacity=self.capacity.get(pool, 0.0),
            held=self.held.get(pool, 0.0),
            high_held=self.high_held.get(pool, 0.0),
            waiting=max(self.waiting.get(pool, 0.0), 0.0),
            low_waiting=max(self.low_waiting.get(pool, 0.0), 0.0),
        )
