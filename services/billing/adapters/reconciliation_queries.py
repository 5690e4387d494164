"""Reconciliation against the database: the ledger versus usage rebuilt from billing's own records, and
versus the hosts' running and exit facts (the independent check, services/billing/domain/host_facts.py).

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
from services.billing.adapters.sla_store import decision_from_row, incident_from_row
from services.billing.domain.credit_check import CreditEntry, CreditReconciliation, check_credits
from services.billing.domain.host_facts import BilledAllocation, HostReconciliation, check_against_hosts
from services.billing.domain.ledger import JournalEntry, Posting
from services.billing.domain.rating import ChargeLine
from services.billing.domain.reconciliation import (
    FactKind,
    LifecycleFact,
    PlacementFact,
    Reconciliation,
    compare,
    recompute,
)

__all__ = ["check_credits_against_incidents", "check_hosts", "ledger_sides", "reconcile_ledger"]

#: Charges and their reversals (credits are reconciled against incidents, ``check_credits``).
ALL_ENTRIES = (
    "SELECT entry_id, source_event_id, at, tenant_id, project, description, reverses_entry_id "
    "FROM journal_entries WHERE kind = 'charge'"
)
ALL_POSTINGS = (
    "SELECT p.entry_id, p.account, p.debit_micro, p.credit_micro FROM postings p "
    "JOIN journal_entries e ON e.entry_id = p.entry_id WHERE e.kind = 'charge'"
)
#: Net charges per allocation: charges plus their (negative) reversals.
NET_BY_ALLOCATION = (
    "SELECT allocation_id, sum(amount_micro) AS net FROM journal_entries WHERE kind = 'charge' "
    "GROUP BY allocation_id"
)
#: The whole ledger, credits included: debits and credits of every posting.
LEDGER_SIDES = (
    "SELECT coalesce(sum(debit_micro), 0)::bigint AS debit, coalesce(sum(credit_micro), 0)::bigint AS credit "
    "FROM postings"
)
CREDIT_ENTRIES = (
    "SELECT entry_id, incident_id, workload_id, tenant_id, project, amount_micro FROM journal_entries "
    "WHERE kind = 'credit'"
)
ALL_DECISIONS = "SELECT * FROM sla_credits ORDER BY running_at, incident_id, workload_id"
ALL_INCIDENTS = "SELECT * FROM incidents"


async def reconcile_ledger(
    conn: asyncpg.Connection[Any], *, now: datetime, interval: timedelta
) -> Reconciliation:
    """Compare the whole ledger with usage recomputed from stored facts; run in a REPEATABLE READ snapshot."""
    store = AllocationStore(conn)
    prices = await PriceStore(conn).price_list()
    rows = await store.all_allocations()
    facts_by_placement: defaultdict[str, list[PlacementFact]] = defaultdict(list)
    for fact in await store.facts():
        facts_by_placement[fact.placement_id].append(fact)
    groups: defaultdict[datetime, list[LifecycleFact]] = defaultdict(list)
    for row in rows:
        as_of = now if not row.open else row.rated_until
        groups[as_of].extend(_facts(row, facts_by_placement[row.placement_id]))
    lines: list[ChargeLine] = []
    for as_of, facts in groups.items():
        lines.extend(recompute(facts=facts, prices=prices, as_of=as_of, interval=interval))
    return compare(lines=lines, entries=await _entries(conn))


async def check_hosts(conn: asyncpg.Connection[Any], *, interval: timedelta) -> HostReconciliation:
    """Compare each placement's ledger charges with what the hosts' facts make it owe (same snapshot)."""
    store = AllocationStore(conn)
    prices = await PriceStore(conn).price_list()
    net = {r["allocation_id"]: int(r["net"]) for r in await conn.fetch(NET_BY_ALLOCATION)}
    billed = [
        BilledAllocation(
            allocation=row.allocation,
            placement_id=row.placement_id,
            running=row.running,
            open=row.open,
            rated_until=row.rated_until,
            ledger_micro=net.get(row.allocation.allocation_id, 0),
        )
        for row in await store.all_allocations()
    ]
    return check_against_hosts(
        allocations=billed, host_facts=await store.host_facts(), prices=prices, interval=interval
    )


async def check_credits_against_incidents(conn: asyncpg.Connection[Any]) -> CreditReconciliation:
    """Every credit against its decision and incident (same snapshot)."""
    incidents = {r["incident_id"]: incident_from_row(r) for r in await conn.fetch(ALL_INCIDENTS)}
    entries = [
        CreditEntry(
            entry_id=r["entry_id"],
            incident_id=r["incident_id"],
            workload_id=r["workload_id"],
            tenant_id=r["tenant_id"],
            project=r["project"],
            amount_micro=r["amount_micro"],
        )
        for r in await conn.fetch(CREDIT_ENTRIES)
    ]
    decisions = [decision_from_row(r) for r in await conn.fetch(ALL_DECISIONS)]
    return check_credits(decisions=decisions, entries=entries, incidents=incidents)


async def ledger_sides(conn: asyncpg.Connection[Any]) -> tuple[int, int]:
    """(debits, credits) over every posting of the ledger, credits included: equal when it balances."""
    row = await conn.fetchrow(LEDGER_SIDES)
    assert row is not None  # an aggregate always returns a row
    return int(row["debit"]), int(row["credit"])


def _facts(row: AllocationRow, facts: list[PlacementFact]) -> list[LifecycleFact]:
    """A running allocation charged from its start to its first end fact; one never run owes nothing."""
    if not row.running:
        return []
    allocation_id = row.allocation.allocation_id
    start = LifecycleFact(
        kind=FactKind.RUNNING,
        allocation_id=allocation_id,
        at=row.allocation.started_at,
        allocation=row.allocation,
    )
    out = [start]
    for f in facts:
        if f.kind is not FactKind.ENDED:
            continue
        at = max(f.at, row.allocation.started_at)  # an end before the start charges nothing, as metering
        if (reason := f.end_reason) is None:
            raise ValueError(f"the end fact of placement {f.placement_id} has no reason")
        out.append(LifecycleFact(kind=FactKind.ENDED, allocation_id=allocation_id, at=at, end_reason=reason))
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
