"""Per-tenant quota arithmetic that the Redis Lua script mirrors step for step.

State per tenant is three integers: gpus (whole GPUs held), units_milli (compute units x 1000, rounded up, so
Lua works on integers only) and workloads (placed or running). A limit of None means unlimited.
check: every dimension must satisfy usage + demand <= limit. reserve: check, then add all three.
release: subtract, never going below zero (a double release after a Redis rebuild must not go negative).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from services.scheduler.domain.creation import CreationSpec
from services.scheduler.domain.errors import QuotaExceeded
from services.scheduler.domain.model import GpuRequest, UnitsRequest

__all__ = [
    "DIMENSIONS",
    "QuotaLimits",
    "QuotaUsage",
    "check",
    "demand_of",
    "release",
    "reserve",
    "spec_demand",
    "to_milli",
]

DIMENSIONS: tuple[str, ...] = ("gpus", "units_milli", "workloads")


@dataclass(frozen=True, slots=True)
class QuotaLimits:
    """A tenant's ceilings; None is unlimited."""

    gpus: int | None = None
    units_milli: int | None = None
    workloads: int | None = None


@dataclass(frozen=True, slots=True)
class QuotaUsage:
    """What a tenant holds now, or what one workload asks for."""

    gpus: int = 0
    units_milli: int = 0
    workloads: int = 0


def to_milli(units: float) -> int:
    """Compute units as integer milli-units, rounded up so a quota is never under-counted."""
    return math.ceil(round(units * 1000, 6))


def demand_of(*, gpus: int, units: float) -> QuotaUsage:
    """The quota demand of one workload holding `gpus` whole GPUs worth `units` in total."""
    return QuotaUsage(gpus=gpus, units_milli=to_milli(units), workloads=1)


def spec_demand(spec: CreationSpec) -> QuotaUsage:
    """What one creation request will hold at least (units of a GPU request are known only once placed)."""
    r = spec.resources
    gpus = r.count if isinstance(r, GpuRequest) else 0
    units = to_milli(r.units) if isinstance(r, UnitsRequest) else 0
    return QuotaUsage(gpus=gpus, units_milli=units, workloads=1)


def check(*, limits: QuotaLimits, usage: QuotaUsage, demand: QuotaUsage) -> tuple[str, ...]:
    """Names of the dimensions the demand would exceed; empty means it fits."""
    exceeded: list[str] = []
    for dim in DIMENSIONS:
        limit = getattr(limits, dim)
        if limit is not None and getattr(usage, dim) + getattr(demand, dim) > limit:
            exceeded.append(dim)
    return tuple(exceeded)


def reserve(*, tenant: str, limits: QuotaLimits, usage: QuotaUsage, demand: QuotaUsage) -> QuotaUsage:
    """Usage after taking `demand`, or QuotaExceeded naming every dimension over its limit."""
    exceeded = check(limits=limits, usage=usage, demand=demand)
    if exceeded:
        raise QuotaExceeded(tenant=tenant, exceeded=exceeded)
    return QuotaUsage(
        gpus=usage.gpus + demand.gpus,
        units_milli=usage.units_milli + demand.units_milli,
        workloads=usage.workloads + demand.workloads,
    )


def release(*, usage: QuotaUsage, demand: QuotaUsage) -> QuotaUsage:
    """Usage after giving `demand` back, floored at zero per dimension."""
    return QuotaUsage(
        gpus=max(usage.gpus - demand.gpus, 0),
        units_milli=max(usage.units_milli - demand.units_milli, 0),
        workloads=max(usage.workloads - demand.workloads, 0),
    )
