"""Which slot types can serve a request, and a best-fit plan for taking them from the free index."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from services.scheduler.domain.cluster import Grant, SlotKind, SlotType
from services.scheduler.domain.index import BinKey, FreeIndex, Signature, SlotKey
from services.scheduler.domain.model import GangPolicy, GpuRequest, MigRequest, ResourceRequest, UnitsRequest

__all__ = [
    "TRAINING_MAX_SHARE_RATIO",
    "Ask",
    "Option",
    "Plan",
    "find_plan",
    "options_for",
    "plan_units",
    "take_plan",
]

#: The finest time-slice share a training job may run on: the source article measured training 23%
#: slower beyond 1:4 (inventory refuses to slice a GPU for training beyond it; the scheduler refuses to
#: place training on a finer share sliced for inference).
TRAINING_MAX_SHARE_RATIO = 4

_EPS = 1e-9
Plan = tuple[tuple[BinKey, int], ...]


@dataclass(frozen=True, slots=True)
class Option:
    """`count` slots of one type would satisfy the request."""

    stype: SlotType
    count: int


@dataclass(frozen=True, slots=True)
class Ask:
    """A waiting workload's request, resolved against one index: what would satisfy it and where."""

    workload_id: str
    priority: float
    options: tuple[Option, ...]
    sigs: tuple[Signature, ...]
    gang: GangPolicy
    #: Slots it must not get, free or freed (a migration's target is never a GPU it moves away from).
    avoid: frozenset[SlotKey] = frozenset()


def _gpu_options(request: GpuRequest, types: Iterable[SlotType]) -> list[Option]:
    floor = request.min_memory_gb or 0
    fits = [
        t for t in types if t.kind is SlotKind.WHOLE and t.model == request.model and t.memory_gb >= floor
    ]
    # Smallest memory first: leave the big cards to whoever needs them.
    return [Option(t, request.count) for t in sorted(fits, key=lambda t: (t.memory_gb, t.units))]


def _mig_options(request: MigRequest, types: Iterable[SlotType]) -> list[Option]:
    fits = [
        t
        for t in types
        if t.kind is SlotKind.MIG and t.profile == request.profile and request.model in (None, t.model)
    ]
    return [Option(t, 1) for t in sorted(fits, key=lambda t: (t.units, t.model))]


def _units_option(units: float, stype: SlotType) -> Option | None:
    if stype.units + _EPS >= units:
        return Option(stype, 1)
    if stype.kind is SlotKind.WHOLE:  # only whole GPUs combine; several MIG slices or shares make no device
        return Option(stype, math.ceil(units / stype.units - _EPS))
    return None


def _units_options(request: UnitsRequest, types: Iterable[SlotType]) -> list[Option]:
    found = [o for o in (_units_option(request.units, t) for t in types) if o is not None]
    # Best fit by units: least waste, then fewest devices, then a stable order.
    return sorted(found, key=lambda o: (o.count * o.stype.units - request.units, o.count, o.stype))


def options_for(
    request: ResourceRequest, types: Iterable[SlotType], *, training: bool = False
) -> tuple[Option, ...]:
    """Slot types (best first) and how many of each would satisfy the request.

    ``training``: the workload is a job, so a share of a GPU sliced finer than TRAINING_MAX_SHARE_RATIO
    is no option (the same cap inventory applies when a GPU is sliced for training).
    """
    if isinstance(request, GpuRequest):
        return tuple(_gpu_options(request, types))
    if isinstance(request, MigRequest):
        return tuple(_mig_options(request, types))
    if training:
        types = [t for t in types if not (t.kind is SlotKind.SHARE and t.ratio > TRAINING_MAX_SHARE_RATIO)]
    return tuple(_units_options(request, types))


def _spread(index: FreeIndex, option: Option, sigs: tuple[Signature, ...]) -> Plan | None:
    if index.total_free(option.stype, sigs) < option.count:
        return None
    plan: list[tuple[BinKey, int]] = []
    needed = option.count
    for key, free in index.bins_fullest_first(option.stype, sigs):
        take = min(free, needed)
        plan.append((key, take))
        needed -= take
        if needed == 0:
            break
    return tuple(plan)


def find_plan(
    index: FreeIndex, *, options: tuple[Option, ...], sigs: tuple[Signature, ...], gang: GangPolicy
) -> tuple[Option, Plan] | None:
    """A best-fit plan on one node; across nodes only for all-or-nothing gangs, and only if all fit."""
    for option in options:
        key = index.best_bin(option.stype, sigs, option.count)
        if key is not None:
            return option, ((key, option.count),)
    if gang is GangPolicy.ALL_OR_NOTHING:
        for option in options:
            plan = _spread(index, option, sigs)
            if plan is not None:
                return option, plan
    return None


def plan_units(option: Option) -> float:
    """Compute units a plan built from this option takes."""
    return option.count * option.stype.units


def take_plan(index: FreeIndex, plan: Plan) -> tuple[Grant, ...]:
    """Take every slot of a plan out of the index."""
    return tuple(g for key, count in plan for g in index.take(key, count))
