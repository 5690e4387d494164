"""Reconciliation: recompute usage from lifecycle facts and prove the ledger equals it."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum

from services.billing.domain.ledger import JournalEntry, receivable_totals
from services.billing.domain.prices import PriceList
from services.billing.domain.rating import DEFAULT_INTERVAL, Allocation, ChargeLine, EndReason, rate

__all__ = [
    "Difference",
    "FactKind",
    "LifecycleFact",
    "PlacementFact",
    "Reconciliation",
    "allocations_from_facts",
    "compare",
    "recompute",
    "reconcile",
]


class FactKind(StrEnum):
    """The lifecycle facts billing needs from the scheduler."""

    PLACED = "placed"
    RUNNING = "running"
    ENDED = "ended"


@dataclass(frozen=True, slots=True, kw_only=True)
class LifecycleFact:
    """One lifecycle fact; placed/running carry the allocation's attributes, ended its reason."""

    kind: FactKind
    allocation_id: str
    at: datetime
    allocation: Allocation | None = None
    end_reason: EndReason | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PlacementFact:
    """A lifecycle fact of a placement as received and kept: placed, or ended with its reason."""

    kind: FactKind
    placement_id: str
    at: datetime
    end_reason: EndReason | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Difference:
    """A tenant project whose ledger balance differs from recomputed usage."""

    tenant_id: str
    project: str
    expected_micro: int
    ledger_micro: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Reconciliation:
    """Outcome of a reconciliation: equal when there are no differences and no stray charges."""

    differences: tuple[Difference, ...]
    missing_keys: tuple[str, ...]  # recomputed charges absent from the ledger
    unexpected_keys: tuple[str, ...]  # ledger charges that recomputation does not produce

    @property
    def equal(self) -> bool:
        """True when the ledger matches recomputed usage exactly."""
        return not (self.differences or self.missing_keys or self.unexpected_keys)


def allocations_from_facts(facts: Iterable[LifecycleFact]) -> list[Allocation]:
    """Fold facts (in any order, duplicates allowed) into allocations: earliest start, earliest end."""
    by_id: defaultdict[str, list[LifecycleFact]] = defaultdict(list)
    for fact in facts:
        by_id[fact.allocation_id].append(fact)
    return [_fold(allocation_id, group) for allocation_id, group in sorted(by_id.items())]


def recompute(
    *,
    facts: Iterable[LifecycleFact],
    prices: PriceList,
    as_of: datetime,
    interval: timedelta = DEFAULT_INTERVAL,
) -> list[ChargeLine]:
    """Every charge line the facts imply as of `as_of`, rated from scratch."""
    lines: list[ChargeLine] = []
    for allocation in allocations_from_facts(facts):
        rating = rate(allocation=allocation, rated_until=None, now=as_of, prices=prices, interval=interval)
        lines.extend(rating.lines)
    return lines


def reconcile(
    *,
    facts: Iterable[LifecycleFact],
    prices: PriceList,
    entries: Sequence[JournalEntry],
    as_of: datetime,
    interval: timedelta = DEFAULT_INTERVAL,
) -> Reconciliation:
    """Compare ledger balances per tenant project, and charge keys, with usage recomputed as of `as_of`."""
    lines = recompute(facts=facts, prices=prices, as_of=as_of, interval=interval)
    return compare(lines=lines, entries=entries)


def compare(*, lines: Iterable[ChargeLine], entries: Sequence[JournalEntry]) -> Reconciliation:
    """Compare recomputed charge lines with ledger entries: balances per tenant project, and charge keys."""
    lines = list(lines)
    expected: defaultdict[tuple[str, str], int] = defaultdict(int)
    for line in lines:
        expected[(line.tenant_id, line.project)] += line.amount_micro
    ledger = receivable_totals(entries)
    differences = tuple(
        Difference(
            tenant_id=t, project=p, expected_micro=expected.get((t, p), 0), ledger_micro=ledger.get((t, p), 0)
        )
        for t, p in sorted(expected.keys() | ledger.keys())
        if expected.get((t, p), 0) != ledger.get((t, p), 0)
    )
    want = {line.key for line in lines}
    have = _live_charge_keys(entries)
    return Reconciliation(
        differences=differences,
        missing_keys=tuple(sorted(want - have)),
        unexpected_keys=tuple(sorted(have - want)),
    )


def _fold(allocation_id: str, facts: list[LifecycleFact]) -> Allocation:
    starts = [f for f in facts if f.kind is not FactKind.ENDED and f.allocation is not None]
    if not starts:
        raise ValueError(f"allocation {allocation_id} has no placed or running fact")
    first = min(starts, key=lambda f: f.at)
    assert first.allocation is not None  # guaranteed by the filter above
    ends = sorted((f for f in facts if f.kind is FactKind.ENDED), key=lambda f: f.at)
    end = ends[0] if ends else None
    return replace(
        first.allocation,
        started_at=first.at,
        ended_at=end.at if end else None,
        end_reason=end.end_reason if end else None,
    )


def _live_charge_keys(entries: Sequence[JournalEntry]) -> set[str]:
    reversed_ids = {e.reverses_entry_id for e in entries if e.reverses_entry_id is not None}
    return {  # a charge's entry id is its charge key (the source names the events behind it)
        e.entry_id.removeprefix("charge:")
        for e in entries
        if e.reverses_entry_id is None and e.entry_id not in reversed_ids and e.entry_id.startswith("charge:")
    }
