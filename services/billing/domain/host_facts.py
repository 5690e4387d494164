"""The ledger against an independent source: what the hosts reported, per placement.

Billing charges from the scheduler's events. The node agents' own reports (a placement running, its
process exited), read by billing straight from the agent's topic, say the same things without the
scheduler in between, so they can catch a charge that follows the scheduler rather than the host
(for example an end billed when the scheduler came back from an outage, not when the job exited).

For each placement billing holds, the hosts' interval is rebuilt:
- **start**: the earliest running fact of the placement (none: the host never ran it, nothing owed);
- **end**: the earliest of the placement's exit fact, the host running the workload on another
  placement after it (a move: one instant ends the one and starts the other), and, for the ends no host
  reports (a cancel, a preemption, a reclaim), the scheduler's end as billing recorded it. With none of
  these a closed placement falls back to billing's own end (``billed``: nothing independent to check);
  an open one is compared up to the instant it is rated to.
Each allocation of the placement is rated over that interval from scratch, and the sum is compared with
the ledger's net charges (reversals included) for the same allocations.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum

from services.billing.domain.prices import PriceList
from services.billing.domain.rating import DEFAULT_INTERVAL, Allocation, EndReason, rate

__all__ = [
    "BilledAllocation",
    "EndBasis",
    "HostFact",
    "HostFactKind",
    "HostReconciliation",
    "PlacementCheck",
    "check_against_hosts",
]

#: Ends the host never reports: the scheduler decided them, and the host only stopped the work.
_SCHEDULER_ENDS = frozenset({EndReason.CANCELLED, EndReason.PREEMPTED, EndReason.RECLAIMED})


class HostFactKind(StrEnum):
    """What a node agent reports about a placement."""

    RUNNING = "running"  # started, or running on it at the end of a migration
    EXITED = "exited"  # its process ended on the host


@dataclass(frozen=True, slots=True, kw_only=True)
class HostFact:
    """One report of a node agent about a placement, at the instant the host saw it."""

    kind: HostFactKind
    workload_id: str
    tenant_id: str
    placement_id: str
    node: str
    at: datetime
    outcome: str | None = None  # completed or failed, for an exit


class EndBasis(StrEnum):
    """Where a placement's end in the check comes from."""

    HOST_EXIT = "host_exit"  # the host's exit fact
    HOST_MOVE = "host_move"  # the host ran the workload on its next placement
    SCHEDULER = "scheduler"  # a cancel, preemption or reclaim: no host reports those
    BILLED = "billed"  # no independent end: billing's own
    OPEN = "open"  # not ended: compared up to where it is rated
    NEVER_RAN = "never_ran"  # no host running fact: nothing is owed


@dataclass(frozen=True, slots=True, kw_only=True)
class BilledAllocation:
    """An allocation as billing holds it, with its net charges in the ledger."""

    allocation: Allocation
    placement_id: str
    running: bool
    open: bool
    rated_until: datetime
    ledger_micro: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PlacementCheck:
    """One placement: the hosts' interval and what it costs, next to what the ledger charged."""

    placement_id: str
    workload_id: str
    tenant_id: str
    project: str
    host_started_at: datetime | None
    host_ended_at: datetime | None
    end_basis: EndBasis
    billed_started_at: datetime | None
    billed_ended_at: datetime | None
    expected_micro: int
    ledger_micro: int

    @property
    def difference_micro(self) -> int:
        """Ledger minus hosts: above zero an over-charge, below an under-charge."""
        return self.ledger_micro - self.expected_micro


@dataclass(frozen=True, slots=True, kw_only=True)
class HostReconciliation:
    """Every placement checked, in placement order."""

    checked: tuple[PlacementCheck, ...]

    @property
    def differences(self) -> tuple[PlacementCheck, ...]:
        """The placements whose ledger charges differ from the hosts' interval."""
        return tuple(c for c in self.checked if c.difference_micro != 0)

    @property
    def equal(self) -> bool:
        """True when every placement's charges equal what its hosts' interval costs."""
        return not self.differences


def check_against_hosts(
    *,
    allocations: Sequence[BilledAllocation],
    host_facts: Iterable[HostFact],
    prices: PriceList,
    interval: timedelta = DEFAULT_INTERVAL,
) -> HostReconciliation:
    """Compare each placement's ledger charges with its allocations rated over the hosts' interval."""
    runs: defaultdict[str, list[datetime]] = defaultdict(list)  # placement -> running facts
    exits: defaultdict[str, list[datetime]] = defaultdict(list)
    placements_of: defaultdict[str, set[str]] = defaultdict(set)  # workload -> placements run
    for fact in host_facts:
        (runs if fact.kind is HostFactKind.RUNNING else exits)[fact.placement_id].append(fact.at)
        placements_of[fact.workload_id].add(fact.placement_id)
    first_run = {p: min(ats) for p, ats in runs.items()}
    by_placement: defaultdict[str, list[BilledAllocation]] = defaultdict(list)
    for billed in allocations:
        by_placement[billed.placement_id].append(billed)
    checks = []
    for placement_id, group in sorted(by_placement.items()):
        start = first_run.get(placement_id)
        workload_id = group[0].allocation.workload_id
        moves = [
            first_run[q]
            for q in placements_of.get(workload_id, ())
            if q != placement_id and q in first_run and start is not None and first_run[q] > start
        ]
        end, basis = _host_end(group[0], start=start, exits=exits.get(placement_id, []), moves=moves)
        expected = sum(_expected(b, start=start, end=end, prices=prices, interval=interval) for b in group)
        first = group[0]
        checks.append(
            PlacementCheck(
                placement_id=placement_id,
                workload_id=workload_id,
                tenant_id=first.allocation.tenant_id,
                project=first.allocation.project,
                host_started_at=start,
                host_ended_at=end,
                end_basis=basis,
                billed_started_at=first.allocation.started_at if first.running else None,
                billed_ended_at=first.allocation.ended_at,
                expected_micro=expected,
                ledger_micro=sum(b.ledger_micro for b in group),
            )
        )
    return HostReconciliation(checked=tuple(checks))


def _host_end(
    billed: BilledAllocation, *, start: datetime | None, exits: list[datetime], moves: list[datetime]
) -> tuple[datetime | None, EndBasis]:
    if start is None:
        return None, EndBasis.NEVER_RAN
    candidates: list[tuple[datetime, EndBasis]] = []
    if exits:
        candidates.append((min(exits), EndBasis.HOST_EXIT))
    if moves:
        candidates.append((min(moves), EndBasis.HOST_MOVE))
    a = billed.allocation
    if not billed.open and a.ended_at is not None and a.end_reason in _SCHEDULER_ENDS:
        candidates.append((a.ended_at, EndBasis.SCHEDULER))
    if candidates:
        return min(candidates, key=lambda c: c[0])
    if billed.open:
        return None, EndBasis.OPEN
    return a.ended_at, EndBasis.BILLED


def _expected(
    billed: BilledAllocation,
    *,
    start: datetime | None,
    end: datetime | None,
    prices: PriceList,
    interval: timedelta,
) -> int:
    if start is None:
        return 0
    if billed.open:  # rated so far: compare up to the same instant
        as_of = billed.rated_until
        end = end if end is not None and end < as_of else None
    else:
        as_of = end if end is not None else start
    ended = None if end is None else max(end, start)
    allocation = replace(billed.allocation, started_at=start, ended_at=ended, end_reason=None)
    rating = rate(
        allocation=allocation, rated_until=None, now=max(as_of, start), prices=prices, interval=interval
    )
    return sum(line.amount_micro for line in rating.lines)
