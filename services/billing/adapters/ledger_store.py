"""Postgres access for the journal and its postings (never commits).

Entries and their postings are inserted in bulk, in one statement per call, so the database's
balance trigger sees every entry's postings together; the unique source key makes a repeated charge
a no-op (its postings are not inserted again).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, TypeAlias

import asyncpg

from services.billing.domain.entry_records import EntryRecord
from services.billing.domain.ledger import JournalEntry, Posting

__all__ = ["LedgerStore"]

Conn: TypeAlias = "asyncpg.Connection[Any]"

# One statement posts a batch: the entries not seen before, then the postings of exactly those
# (joined by the entry's position in the batch, so a posting names its entry without repeating the
# entry's tenant, project and time), so the balance trigger sees every entry's postings together.
POST_ENTRIES = """
WITH batch AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::text[], $5::text[], $6::text[],
        $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::timestamptz[],
        $13::timestamptz[], $14::text[], $15::numeric[], $16::numeric[], $17::text[], $18::bigint[],
        $19::bigint[], $20::text[], $21::text[], $22::text[], $23::text[]) WITH ORDINALITY
        AS b (entry_id, source_event_id, at, tenant_id, project, description, reverses_entry_id,
              allocation_id, workload_id, resource, pricing_class, period_start, period_end, basis,
              quantity_hours, compute_unit_hours, price_id, micro_per_hour, amount_micro, kind,
              opened_by_event_id, closed_by_event_id, incident_id, n)
), fresh AS (
    INSERT INTO journal_entries (entry_id, source_event_id, at, tenant_id, project, description,
        reverses_entry_id, allocation_id, workload_id, resource, pricing_class, period_start, period_end,
        basis, quantity_hours, compute_unit_hours, price_id, micro_per_hour, amount_micro, kind,
        opened_by_event_id, closed_by_event_id, incident_id)
    SELECT entry_id, source_event_id, at, tenant_id, project, description, reverses_entry_id,
        allocation_id, workload_id, resource, pricing_class, period_start, period_end, basis,
        quantity_hours, compute_unit_hours, price_id, micro_per_hour, amount_micro, kind,
        opened_by_event_id, closed_by_event_id, incident_id
    FROM batch
    ON CONFLICT DO NOTHING RETURNING entry_id
), posted AS (
    INSERT INTO postings (entry_id, account, debit_micro, credit_micro, tenant_id, project, at)
    SELECT b.entry_id, p.account, p.debit_micro, p.credit_micro, b.tenant_id, b.project, b.at
    FROM unnest($24::bigint[], $25::text[], $26::bigint[], $27::bigint[])
        WITH ORDINALITY AS p (n, account, debit_micro, credit_micro, k)
    JOIN batch b USING (n)
    WHERE b.entry_id IN (SELECT entry_id FROM fresh)
    ORDER BY p.k
)
SELECT entry_id FROM fresh
"""
# Live charges of an allocation ending after an instant: neither a reversal nor already reversed (credits
# are not charges: an end never reverses them).
LIVE_CHARGES_AFTER = """
SELECT e.* FROM journal_entries e
WHERE e.allocation_id = $1 AND e.kind = 'charge' AND e.period_end > $2 AND e.reverses_entry_id IS NULL
  AND NOT EXISTS (SELECT 1 FROM journal_entries r WHERE r.reverses_entry_id = e.entry_id)
ORDER BY e.period_start
"""
SELECT_POSTINGS_OF = (
    "SELECT entry_id, account, debit_micro, credit_micro FROM postings WHERE entry_id = ANY($1)"
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
            r.kind,
            r.opened_by_event_id,
            r.closed_by_event_id,
            r.incident_id,
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
        kind=r["kind"],
        opened_by_event_id=r["opened_by_event_id"],
        closed_by_event_id=r["closed_by_event_id"],
        incident_id=r["incident_id"],
    )
