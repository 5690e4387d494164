"""Append-only double-entry journal: every charge debits a tenant project and credits revenue."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from services.billing.domain.prices import PricingClass
from services.billing.domain.rating import ChargeLine

__all__ = [
    "CostGroup",
    "JournalEntry",
    "LedgerRow",
    "Posting",
    "ProjectBalance",
    "UnbalancedEntryError",
    "balances",
    "ledger_rows",
    "post_charge",
    "post_charges",
    "receivable_account",
    "receivable_totals",
    "revenue_account",
    "reverse",
    "source_key",
    "unseen",
    "validate_entry",
]


class UnbalancedEntryError(ValueError):
    """A journal entry whose debits and credits differ, or that is otherwise malformed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Posting:
    """One side of an entry on one account; exactly one of debit and credit is used."""

    account: str
    debit_micro: int = 0
    credit_micro: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class JournalEntry:
    """A balanced set of postings; `source_event_id` is unique in the ledger (idempotency)."""

    entry_id: str
    source_event_id: str
    at: datetime
    description: str
    tenant_id: str
    project: str
    postings: tuple[Posting, ...]
    reverses_entry_id: str | None = None

    def __post_init__(self) -> None:
        validate_entry(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerRow:
    """One posting flattened with its entry: the row the ledger table and the exports hold."""

    entry_id: str
    source_event_id: str
    at: datetime
    tenant_id: str
    project: str
    account: str
    debit_micro: int
    credit_micro: int
    description: str
    reverses_entry_id: str | None
    kind: str = "charge"  # charge (or its reversal) or credit
    opened_by_event_id: str | None = None  # the event that opened the entry's interval
    closed_by_event_id: str | None = None  # the event that closed it, when known at posting
    incident_id: str | None = None  # a credit's incident


@dataclass(frozen=True, slots=True, kw_only=True)
class ProjectBalance:
    """What one tenant project owes over its whole ledger (charges less SLA credits), and how many entries
    make it up."""

    tenant_id: str
    project: str
    balance_micro: int
    entries: int
    charged_micro: int = 0  # charges net of their reversals
    credited_micro: int = 0  # SLA credits


@dataclass(frozen=True, slots=True, kw_only=True)
class CostGroup:
    """The charges of one group (a project, team, model, day or tag value): amount and usage."""

    key: str
    amount_micro: int
    compute_unit_hours: Decimal


def receivable_account(*, tenant_id: str, project: str) -> str:
    """The account a tenant project owes on."""
    return f"tenant:{tenant_id}:project:{project}"


def revenue_account(pricing_class: PricingClass) -> str:
    """The revenue account for one pricing class."""
    return f"revenue:{pricing_class.value}"


def validate_entry(entry: JournalEntry) -> None:
    """Refuse entries with fewer than two postings, negative or two-sided postings, or unequal sides."""
    if len(entry.postings) < 2:
        raise UnbalancedEntryError(f"{entry.entry_id}: an entry needs at least two postings")
    for p in entry.postings:
        if p.debit_micro < 0 or p.credit_micro < 0 or (p.debit_micro and p.credit_micro):
            raise UnbalancedEntryError(f"{entry.entry_id}: posting on {p.account} must be one-sided")
    debits = sum(p.debit_micro for p in entry.postings)
    credits = sum(p.credit_micro for p in entry.postings)
    if debits != credits:
        raise UnbalancedEntryError(f"{entry.entry_id}: debits {debits} != credits {credits}")


def source_key(charge: ChargeLine, *, opened_by: str | None) -> str:
    """A charge line's unique source: the event that started its allocation's charging (the placement's
    running event), the resource and the line's period (a re-rated last line differs from the one it
    replaces by its end); the bare charge key for an allocation that started before billing kept that
    event."""
    if opened_by is None:
        return charge.key
    start, end = charge.period_start.isoformat(), charge.period_end.isoformat()
    return f"{opened_by}/{charge.resource.label()}@{start}/{end}"


def post_charge(charge: ChargeLine, *, opened_by: str | None = None) -> JournalEntry:
    """Debit the tenant project, credit revenue for the charge's pricing class; the entry id is the charge
    key, the source the event that opened its interval (``source_key``)."""
    return _charge_entry(charge, _charge_postings(charge), opened_by)


def post_charges(charges: Iterable[ChargeLine], *, opened_by: str | None = None) -> list[JournalEntry]:
    """post_charge of each line; lines with equal accounts and amount share one (immutable) posting pair."""
    pairs: dict[tuple[str, str, PricingClass, int], tuple[Posting, ...]] = {}
    entries: list[JournalEntry] = []
    for charge in charges:
        key = (charge.tenant_id, charge.project, charge.pricing_class, charge.amount_micro)
        postings = pairs.get(key)
        if postings is None:
            postings = pairs[key] = _charge_postings(charge)
        entries.append(_charge_entry(charge, postings, opened_by))
    return entries


def _charge_postings(charge: ChargeLine) -> tuple[Posting, ...]:
    return (
        Posting(
            account=receivable_account(tenant_id=charge.tenant_id, project=charge.project),
            debit_micro=charge.amount_micro,
        ),
        Posting(account=revenue_account(charge.pricing_class), credit_micro=charge.amount_micro),
    )


def _charge_entry(charge: ChargeLine, postings: tuple[Posting, ...], opened_by: str | None) -> JournalEntry:
    return JournalEntry(
        entry_id=f"charge:{charge.key}",
        source_event_id=source_key(charge, opened_by=opened_by),
        at=charge.period_end,
        description=f"{charge.resource.label()} {charge.pricing_class.value} {charge.quantity_hours} h",
        tenant_id=charge.tenant_id,
        project=charge.project,
        postings=postings,
    )


def reverse(entry: JournalEntry, *, reason: str, at: datetime) -> JournalEntry:
    """A new entry that undoes `entry` (sides swapped); the original is never edited."""
    if entry.reverses_entry_id is not None:
        raise ValueError("reverse the original charge again instead of reversing a reversal")
    return JournalEntry(
        entry_id=f"reversal:{entry.entry_id}",
        source_event_id=f"reversal:{entry.source_event_id}",
        at=at,
        description=f"reversal: {reason}",
        tenant_id=entry.tenant_id,
        project=entry.project,
        postings=tuple(
            Posting(account=p.account, debit_micro=p.credit_micro, credit_micro=p.debit_micro)
            for p in entry.postings
        ),
        reverses_entry_id=entry.entry_id,
    )


def unseen(entries: Iterable[JournalEntry], *, seen: Collection[str]) -> list[JournalEntry]:
    """The entries whose source event is not yet in the ledger (nor earlier in `entries`)."""
    fresh: list[JournalEntry] = []
    known = set(seen)
    for entry in entries:
        if entry.source_event_id not in known:
            known.add(entry.source_event_id)
            fresh.append(entry)
    return fresh


def balances(entries: Iterable[JournalEntry]) -> dict[str, int]:
    """Debits minus credits per account; over a whole ledger the values sum to zero."""
    totals: defaultdict[str, int] = defaultdict(int)
    for entry in entries:
        for p in entry.postings:
            totals[p.account] += p.debit_micro - p.credit_micro
    return dict(totals)


def receivable_totals(entries: Iterable[JournalEntry]) -> dict[tuple[str, str], int]:
    """What each (tenant, project) owes: the balance of its receivable account."""
    totals: defaultdict[tuple[str, str], int] = defaultdict(int)
    for entry in entries:
        account = receivable_account(tenant_id=entry.tenant_id, project=entry.project)
        for p in entry.postings:
            if p.account == account:
                totals[(entry.tenant_id, entry.project)] += p.debit_micro - p.credit_micro
    return dict(totals)


def ledger_rows(entries: Iterable[JournalEntry]) -> Iterator[LedgerRow]:
    """Flatten entries into rows, lazily, in entry order."""
    for entry in entries:
        for p in entry.postings:
            yield LedgerRow(
                entry_id=entry.entry_id,
                source_event_id=entry.source_event_id,
                at=entry.at,
                tenant_id=entry.tenant_id,
                project=entry.project,
                account=p.account,
                debit_micro=p.debit_micro,
                credit_micro=p.credit_micro,
                description=entry.description,
                reverses_entry_id=entry.reverses_entry_id,
            )
