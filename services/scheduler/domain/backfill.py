"""EASY backfill: the first blocked workload gets a reservation at its shadow time; later work may only
use the reserved slots if it is guaranteed (by its time limit) to finish before that time.

The shadow time is found by replaying expected releases (running work's `ends_at`, or a preemption
deadline when earlier) in time order until the blocked workload fits.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from services.scheduler.domain.cluster import Allocation, Grant
from services.scheduler.domain.fit import Ask, find_plan, take_plan
from services.scheduler.domain.index import FreeIndex

__all__ = ["Reservation", "finishes_before", "release_order", "reserve_head"]


@dataclass(frozen=True, slots=True)
class Reservation:
    """Slots promised to a blocked workload from `start` on."""

    workload_id: str
    start: datetime
    grants: tuple[Grant, ...]
    set_aside: frozenset[tuple[str, str]]  # the reserved slots that were free: taken out of the index


def _expected_end(alloc: Allocation) -> datetime | None:
    ends = [t for t in (alloc.ends_at, alloc.preempt_deadline) if t is not None]
    return min(ends) if ends else None


def release_order(allocations: Iterable[Allocation]) -> list[tuple[datetime, Allocation]]:
    """Allocations with a known end, earliest first; work without an end is never expected back."""
    timed = [(end, a) for a in allocations if (end := _expected_end(a)) is not None]
    timed.sort(key=lambda row: (row[0], row[1].workload_id))
    return timed


def reserve_head(
    index: FreeIndex, *, head: Ask, releases: list[tuple[datetime, Allocation]], now: datetime
) -> Reservation | None:
    """Reserve slots for the head at the earliest time it fits; its free slots leave the index."""
    wanted = {o.stype for o in head.options}
    added: list[tuple[str, str]] = []
    result: Reservation | None = None
    for end, alloc in releases:
        fresh = index.add(g.key for g in alloc.grants if g.key not in head.avoid)
        added.extend(fresh)
        if not any(index.type_of(k) in wanted for k in fresh):
            continue
        found = find_plan(index, options=head.options, sigs=head.sigs, gang=head.gang)
        if found:
            grants = take_plan(index, found[1])
            aside = frozenset(g.key for g in grants) - set(added)
            result = Reservation(head.workload_id, max(end, now), grants, aside)
            break
    index.remove(added)
    return result


def finishes_before(*, now: datetime, time_limit: timedelta | None, start: datetime) -> bool:
    """Whether work starting now is bound by its time limit to end before a reservation starts."""
    return time_limit is not None and now + time_limit <= start
