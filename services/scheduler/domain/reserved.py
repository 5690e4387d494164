"""The article's reserved pool: under contention high-priority work may hold at most 80% of a pool.

"Contention" means demand (held + waiting) exceeds the capacity *and* some low-priority work is
waiting: the cap exists to keep room for that work, so without it high-priority work may use everything.
Capacity, holdings and demand are compute units of one class: the GPUs of one model in one pool (the
GPUs' `pool` label). Room kept on A100s is no use to low work waiting for H100s, so a workload's waiting
demand counts only in the classes it could run on (its best option in each), and a placement is judged
by the classes of the GPUs it would take.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PoolLoad", "ReservedPoolConfig", "admits", "high_headroom", "is_contended", "is_high"]

_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class ReservedPoolConfig:
    """`high_threshold`: priority at or above it is high; `high_cap`: share of capacity high work may hold."""

    high_threshold: float = 0.5
    high_cap: float = 0.8

    def __post_init__(self) -> None:
        if not (0.0 <= self.high_threshold <= 1.0 and 0.0 <= self.high_cap <= 1.0):
            raise ValueError("high_threshold and high_cap must lie in [0, 1]")


@dataclass(frozen=True, slots=True)
class PoolLoad:
    """A pool's capacity and what high-priority work holds, what is held overall and what waits."""

    capacity: float
    held: float
    high_held: float
    waiting: float
    low_waiting: float


def is_high(*, priority: float, config: ReservedPoolConfig) -> bool:
    """Whether a priority counts as high for the reserved pool."""
    return priority >= config.high_threshold


def is_contended(load: PoolLoad) -> bool:
    """Demand exceeds capacity while low-priority work waits."""
    return load.held + load.waiting > load.capacity + _EPS and load.low_waiting > _EPS


def high_headroom(load: PoolLoad, *, config: ReservedPoolConfig) -> float:
    """Units high-priority work may still take in this pool now (infinite without contention)."""
    if not is_contended(load):
        return float("inf")
    return max(config.high_cap * load.capacity - load.high_held, 0.0)


def admits(*, priority: float, units: float, load: PoolLoad, config: ReservedPoolConfig) -> bool:
    """Whether the reserved-pool rule lets a workload of this priority take `units` now."""
    if not is_high(priority=priority, config=config):
        return True
    return units <= high_headroom(load, config=config) + _EPS
