"""Postgres access for the journal, its postings and budget state (never commits).

Entries and their postings are inserted in bulk, in one statement per call, so the database's
balance trigger sees every entry's postings together; the unique source key makes a repeated charge
a no-op (its postings are not inserted again).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, TypeAlias

import asyncpg

from services.billing.budgets import Budget, BudgetState
from services.billing.ledger import JournalEntry, Posting, post_charge, post_charges, reverse
from services.billing.rating import ChargeLine

__all__ = [
    "BudgetStore",
    "EntryRecord",
    "LedgerStore",
    "record_for_charge",
    "record_for_reversal",
    "records_for_charges",
]

Conn: TypeAlias = "asyncpg.Connection[Any]"

# One statement posts a batch: the entries not seen before, then the postings of exactly those
# (joined by the entry's position in the batch, so a posting names its entry without repeating the
# entry's tenant, project and time), so the balance trigger sees every entry's postings together.
POST_ENTRIES = """
WITH batch AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::text[], $5::text[], $6::text[],
        $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::timestamptz[],
        $13::timestamptz[], $14::text[], $15::numeric[], $16::numeric[], $17::text[], $18::bigint[],
        $19::bigint[]) WITH ORDINALITY
        AS b (entry_id, source_event_id, at, tenant_id, project, description, reverses_entry_id,
              allocation_id, workload_id, resource, pricing_class, period_start, period_end, basis,
              quantity_hours, compute_unit_hours, price_id, micro_per_hour, amount_micro, n)
), fresh AS (
    INSERT INTO journal_entries (entry_id, source_event_id, at, tenant_id, project, description,
        reverses_entry_id, allocation_id, workload_id, resource, pricing_class, period_start, period_end,
        basis, quantity_hours, compute_unit_hours, price_id, micro_per_hour, amount_micro)
    SELECT entry_id, source_event_id, at, tenant_id, project, description, reverses_entry_id,
        allocation_id, workload_id, resource, pricing_class, period_start, period_end, basis,
        quantity_hours, compute_unit_hours, price_id, micro_per_hour, amount_micro
    FROM batch
    ON CONFLICT DO NOTHING RETURNING entry_id
), posted AS (
    INSERT INTO postings (entry_id, account, debit_micro, credit_micro, tenant_id, project, at)
    SELECT b.entry_id, p.account, p.debit_micro, p.credit_micro, b.tenant_id, b.project, b.at
    FROM unnest($20::bigint[], $21::text[], $22::bigint[], $23::bigint[])
        WITH ORDINALITY AS p (n, account, debit_micro, credit_micro, k)
    JOIN batch b USING (n)
    WHERE b.entry_id IN (SELECT entry_id FROM fresh)
    ORDER BY p.k
)
SELECT entry_id FROM fresh
"""
# Live charges of an allocation ending after an instant: neither a reversal nor already reversed.
LIVE_CHARGES_AFTER = """
SELECT e.* FROM journal_entries e
WHERE e.allocation_id = $1 AND e.period_end > $2 AND e.reverses_entry_id IS NULL
  AND NOT EXISTS (SELECT 1 FROM journal_entries r WHERE r.reverses_entry_id = e.entry_id)
ORDER BY e.period_start
"""
SELECT_POSTINGS_OF = (
    "SELECT entry_id, account, debit_micro, credit_micro FROM postings WHERE entry_id = ANY($1)"
)
SELECT_BUDGET = "SELECT * FROM budgets WHERE tenant_id = $1 AND project = $2"
SELECT_BUDGET_STATE = (
    "SELECT * FROM budget_state WHERE tenant_id = $1 AND project = $2 AND month = $3 FOR UPDATE"
)
UPSERT_BUDGET_STATE = (
    "INSERT INTO budget_state (tenant_id, project, month, spent_micro, crossed) VALUES ($1, $2, $3, $4, $5) "
    "ON CONFLICT (tenant_id, project, month) DO UPDATE SET spent_micro = $4, crossed = $5"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class EntryRecord:
    """A journal entry with the charge attributes the ledger table keeps beside it."""

    entry: JournalEntry
    allocation_id: str
    workload_id: str
    resource: str
    pricing_class: str
    period_start: datetime
    period_end: datetime
    basis: str
    quantity_hours: Decimal
    compute_unit_hours: Decimal
    price_id: str
    micro_per_hour: int
    amount_micro: int  # change of the receivable: negative on a reversal


def record_for_charge(line: ChargeLine) -> EntryRecord:
    """The entry posting one charge line."""
    return _charge_record(line, post_charge(line))


def records_for_charges(lines: Iterable[ChargeLine]) -> list[EntryRecord]:
    """record_for_charge of each line (entries built by post_charges)."""
    lines = list(lines)
    return [_charge_record(line, entry) for line, entry in zip(lines, post_charges(lines), strict=True)]


def _charge_record(line: ChargeLine, entry: JournalEntry) -> EntryRecord:
    return EntryRecord(
        entry=entry,
        allocation_id=line.allocation_id,
        workload_id=line.workload_id,
        resource=line.resource.label(),
        pricing_class=line.pricing_class.value,
        period_start=line.period_start,
        period_end=line.period_end,
        basis=line.basis.value,
        quantity_hours=line.quantity_hours,
        compute_unit_hours=line.compute_unit_hours,
        price_id=line.price_id,
        micro_per_hour=line.micro_per_hour,
        amount_micro=line.amount_micro,
    )


def record_for_reversal(original: EntryRecord, *, reason: str, at: datetime) -> EntryRecord:
    """The entry that undoes `original`; quantities and amount change sign."""
    return EntryRecord(
        entry=reverse(original.entry, reason=reason, at=at),
        allocation_id=original.allocation_id,
        workload_id=original.workload_id,
        resource=original.resource,
        pricing_class=original.pricing_class,
        period_start=original.period_start,
        period_end=original.period_end,
        basis=original.basis,
        quantity_hours=-original.quantity_hours,
        compute_unit_hours=-original.compute_unit_hours,
        price_id=original.price_id,
        micro_per_hour=original.micro_per_hour,
        amount_micro=-original.amount_micro,
    )


class LedgerStore:
    """The append-only journal."""

    def __init__(self, conn: Conn) -> None:
        self._conn = conn

    async def post(self, records: Sequence[EntryRecord]) -> list[EntryRecord]:
        """Insert entries and their postings; returns those that were new (the rest were posted before)."""
        batch = _first_of_each_entry(records)
        if not batch:
            return []
        rows = await self._conn.fetch(POST_ENTRIES, *_entry_columns(batch), *_posting_columns(batch))
        inserted = {r["entry_id"] for r in rows}
        return [r for r in batch if r.entry.entry_id in inserted]

    async def live_charges_after(self, allocation_id: str, at: datetime) -> list[EntryRecord]:
        """An allocation's unreversed charges for periods ending after `at`."""
        rows = await self._conn.fetch(LIVE_CHARGES_AFTER, allocation_id, at)
        if not rows:
            return []
        postings: dict[str, list[Posting]] = {}
        for p in await self._conn.fetch(SELECT_POSTINGS_OF, [r["entry_id"] for r in rows]):
            postings.setdefault(p["entry_id"], []).append(
                Posting(account=p["account"], debit_micro=p["debit_micro"], credit_micro=p["credit_micro"])
            )
        return [_record(r, tuple(postings[r["entry_id"]])) for r in rows]


class BudgetStore:
    """Budgets and their per-month state."""

    def __init__(self, conn: Conn) -> None:
        self._conn = conn

    async def budget(self, tenant_id: str, project: str) -> Budget | None:
        """A project's budget, if it has one."""
        row = await self._conn.fetchrow(SELECT_BUDGET, tenant_id, project)
        if row is None:
            return None
        return Budget(
            tenant_id=tenant_id,
            project=project,
            limit_micro=row["limit_micro"],
            thresholds=tuple(row["thresholds"]),
            hard_stop=row["hard_stop"],
        )

    async def state(self, tenant_id: str, project: str, month: str) -> BudgetState:
        """A project's spend in one month, locked until the transaction ends."""
        row = await self._conn.fetchrow(SELECT_BUDGET_STATE, tenant_id, project, month)
        if row is None:
            return BudgetState(month=month)
        return BudgetState(month=month, spent_micro=row["spent_micro"], crossed=frozenset(row["crossed"]))

    async def save_state(self, tenant_id: str, project: str, state: BudgetState) -> None:
        """Store a project's spend in one month."""
        await self._conn.execute(
            UPSERT_BUDGET_STATE, tenant_id, project, state.month, state.spent_micro, sorted(state.crossed)
        )


def _first_of_each_entry(records: Sequence[EntryRecord]) -> list[EntryRecord]:
    """The records, each entry once (the first copy): a repeated entry must not post twice."""
    first: dict[str, EntryRecord] = {}
    for r in records:
        first.setdefault(r.entry.entry_id, r)
    return list(first.values())


def _entry_columns(records: Sequence[EntryRecord]) -> list[list[Any]]:
    rows = [
        (
            r.entry.entry_id,
            r.entry.source_event_id,
            r.entry.at,
            r.entry.tenant_id,
            r.entry.project,
            r.entry.description,
            r.entry.reverses_entry_id,
            r.allocation_id,
            r.workload_id,
            r.resource,
            r.pricing_class,
            r.period_start,
            r.period_end,
            r.basis,
            r.quantity_hours,
            r.compute_unit_hours,
            r.price_id,
            r.micro_per_hour,
            r.amount_micro,
        )
        for r in records
    ]
    return [list(column) for column in zip(*rows, strict=True)]


def _posting_columns(records: Sequence[EntryRecord]) -> list[list[Any]]:
    """Each posting as (1-based position of its entry in `records`, account, debit, credit)."""
    entries: list[int] = []
    accounts: list[str] = []
    debits: list[int] = []
    credits: list[int] = []
    for n, r in enumerate(records, start=1):
        for p in r.entry.postings:
            entries.append(n)
            accounts.append(p.account)
            debits.append(p.debit_micro)
            credits.append(p.credit_micro)
    return [entries, accounts, debits, credits]


def _record(r: asyncpg.Record, postings: tuple[Posting, ...]) -> EntryRecord:
    entry = JournalEntry(
        entry_id=r["entry_id"],
        source_event_id=r["source_event_id"],
        at=r["at"],
        description=r["description"],
        tenant_id=r["tenant_id"],
        project=r["project"],
        postings=postings,
        reverses_entry_id=r["reverses_entry_id"],
    )
    return EntryRecord(
        entry=entry,
        allocation_id=r["allocation_id"],
        workload_id=r["workload_id"],
        resource=r["resource"],
        pricing_class=r["pricing_class"],
        period_start=r["period_start"],
        period_end=r["period_end"],
        basis=r["basis"],
        quantity_hours=r["quantity_hours"],
        compute_unit_hours=r["compute_unit_hours"],
        price_id=r["price_id"],
        micro_per_hour=r["micro_per_hour"],
        amount_micro=r["amount_micro"],
    )
