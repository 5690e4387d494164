"""Preemption: high-priority work may evict preemptible, lower-priority work after a grace period."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from services.scheduler.domain.cluster import Allocation, Grant
from services.scheduler.domain.fit import Ask, find_plan, take_plan
from services.scheduler.domain.index import FreeIndex
from services.scheduler.domain.model import Workload, WorkloadState, transition

__all__ = ["PreemptionProposal", "deadline_passed", "may_preempt", "propose_preemption", "requeue_preempted"]


@dataclass(frozen=True, slots=True)
class PreemptionProposal:
    """Ask `victim_id` to give back its grants by `deadline` so `for_workload_id` can run."""

    victim_id: str
    victim_tenant: str
    for_workload_id: str
    deadline: datetime
    grants: tuple[Grant, ...]


def may_preempt(*, priority: float, victim: Allocation, high_threshold: float) -> bool:
    """Only high-priority work, only over preemptible work of strictly lower priority not already leaving."""
    return (
        priority >= high_threshold
        and victim.preemptible
        and victim.preempt_deadline is None
        and victim.priority < priority
    )


def deadline_passed(proposal: PreemptionProposal, *, now: datetime) -> bool:
    """Whether the victim's grace period is over and it may be stopped."""
    return now >= proposal.deadline


def requeue_preempted(workload: Workload) -> Workload:
    """A preempted workload goes back to the queue (placed/running -> preempted -> queued)."""
    if workload.state is not WorkloadState.PREEMPTED:
        workload = transition(workload, target=WorkloadState.PREEMPTED)
    return transition(workload, target=WorkloadState.QUEUED)


def _holders(victims: Iterable[Allocation]) -> dict[tuple[str, str], Allocation]:
    return {g.key: a for a in victims for g in a.grants}


def propose_preemption(
    index: FreeIndex,
    *,
    preemptor: Ask,
    allocations: Iterable[Allocation],
    claimed: Collection[str],
    high_threshold: float,
    now: datetime,
    grace: timedelta,
) -> tuple[tuple[PreemptionProposal, ...], tuple[Grant, ...]] | None:
    """Victims whose slots (with free ones, used first) would fit the preemptor, and every slot it would get.

    Slots the preemptor must avoid (GPUs its migration leaves) are never counted, so no one is evicted
    from them for it.

    On success the free part of those slots stays taken out of the index, reserved for the preemptor.
    """
    victims = [
        a
        for a in allocations
        if a.workload_id not in claimed
        and may_preempt(priority=preemptor.priority, victim=a, high_threshold=high_threshold)
    ]
    # Lowest priority added first, so it sits next to the truly free slots and is taken before others.
    victims.sort(key=lambda a: a.priority)
    added = index.add(g.key for a in victims for g in a.grants if g.key not in preemptor.avoid)
    found = find_plan(index, options=preemptor.options, sigs=preemptor.sigs, gang=preemptor.gang)
    grants = take_plan(index, found[1]) if found else ()
    index.remove(added)
    if not found:
        return None
    holders = _holders(victims)
    hit = {holders[g.key].workload_id: holders[g.key] for g in grants if g.key in holders}
    if not hit:  # fits without evicting anyone: not a preemption, hand the slots back
        index.add(g.key for g in grants)
        return None
    deadline = now + grace
    proposals = tuple(
        PreemptionProposal(a.workload_id, a.tenant, preemptor.workload_id, deadline, a.grants)
        for a in hit.values()
    )
    return proposals, grants
