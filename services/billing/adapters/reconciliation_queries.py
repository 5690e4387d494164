"""Reconciliation against the database: usage rebuilt from the stored lifecycle facts versus the ledger.

Closed allocations are recomputed in full; an open one up to the instant it is rated to (accrual
keeps that within one interval of now), so the check is exact at any time, not only when idle.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

import asyncpg

from services.billing.adapters.allocation_store import AllocationRow, AllocationStore
from services.billing.adapters.price_store import PriceStore
from services.billing.domain.ledger import JournalEntry, Posting
from services.billing.domain.rating import ChargeLine, EndReason
from services.billing.domain.reconciliation import FactKind, LifecycleFact, Reconciliation, compare, recompute

__all__ = ["reconcile_ledger"]

ALL_ENTRIES = (
    "SELECT entry_id, source_event_id, at, tenant_id, project, description, reverses_entry_id "
    "FROM journal_entries"
)
ALL_POSTINGS = "SELECT entry_id, account, debit_micro, credit_micro FROM postings"


async def reconcile_ledger(
    conn: asyncpg.Connection[Any], *, now: datetime, interval: timedelta
) -> Reconciliation:
    """Compare the whole ledger with usage recomputed from stored facts; run in a REPEATABLE READ snapshot."""
    store = AllocationStore(conn)
    prices = await PriceStore(conn).price_list()
    rows = await store.all_allocations()
    facts_by_placement: defaultdict[str, list[asyncpg.Record]] = defaultdict(list)
    for fact in await store.facts():
        facts_by_placement[fact["placement_id"]].append(fact)
    groups: defaultdict[datetime, list[LifecycleFact]] = defaultdict(list)
    for row in rows:
        as_of = now if not row.open else row.rated_until
        groups[as_of].extend(_facts(row, facts_by_placement[row.placement_id]))
    lines: list[ChargeLine] = []
    for as_of, facts in groups.items():
        lines.extend(recompute(facts=facts, prices=prices, as_of=as_of, interval=interval))
    return compare(lines=lines, entries=await _entries(conn))


def _facts(row: AllocationRow, facts: list[asyncpg.Record]) -> list[LifecycleFact]:
    allocation_id = row.allocation.allocation_id
    out = []
    for f in facts:
        if f["kind"] == "placed":
            out.append(
                LifecycleFact(
                    kind=FactKind.PLACED, allocation_id=allocation_id, at=f["at"], allocation=row.allocation
                )
            )
        else:  # an end before the start charges nothing, as metering clamps it
            at = max(f["at"], row.allocation.started_at)
            reason = EndReason(f["end_reason"])
            out.append(
                LifecycleFact(kind=FactKind.ENDED, allocation_id=allocation_id, at=at, end_reason=reason)
            )
    return out


async def _entries(conn: asyncpg.Connection[Any]) -> list[JournalEntry]:
    postings: defaultdict[str, list[Posting]] = defaultdict(list)
    for p in await conn.fetch(ALL_POSTINGS):
        postings[p["entry_id"]].append(
            Posting(account=p["account"], debit_micro=p["debit_micro"], credit_micro=p["credit_micro"])
        )
    return [
        JournalEntry(
            entry_id=r["entry_id"],
            source_event_id=r["source_event_id"],
            at=r["at"],
            description=r["description"],
            tenant_id=r["tenant_id"],
            project=r["project"],
            postings=tuple(postings[r["entry_id"]]),
            reverses_entry_id=r["reverses_entry_id"],
        )
        for r in await conn.fetch(ALL_ENTRIES)
    ]
