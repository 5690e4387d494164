"""Read-side queries for the API: balances, charges, entries, cost analysis, spot usage, decayed usage."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, TypeAlias

import asyncpg

from services.billing.domain.entry_records import ChargeRecord
from services.billing.domain.ledger import CostGroup, JournalEntry, Posting, ProjectBalance
from services.billing.domain.prices import PricingClass, ResourceKey
from services.billing.domain.spot import WorkloadUsage
from services.billing.domain.tags import UNTAGGED

__all__ = [
    "GROUPINGS",
    "balances",
    "charges",
    "costs",
    "decayed_usage",
    "entries_with_postings",
    "spot_usages",
]

Conn: TypeAlias = "asyncpg.Connection[Any] | asyncpg.Pool[Any]"

BALANCES = """
SELECT tenant_id, project, sum(amount_micro)::bigint AS balance_micro, count(*) AS entries,
       coalesce(sum(amount_micro) FILTER (WHERE kind = 'charge'), 0)::bigint AS charged_micro,
       coalesce(-sum(amount_micro) FILTER (WHERE kind = 'credit'), 0)::bigint AS credited_micro
FROM journal_entries WHERE ($1::text IS NULL OR tenant_id = $1) GROUP BY tenant_id, project ORDER BY 1, 2
"""
CHARGES = """
SELECT entry_id, source_event_id, at, tenant_id, project, allocation_id, workload_id, resource,
       pricing_class, period_start, period_end, basis, quantity_hours, compute_unit_hours, price_id,
       micro_per_hour, amount_micro, reverses_entry_id, kind, opened_by_event_id, closed_by_event_id,
       incident_id
FROM journal_entries
WHERE ($1::text IS NULL OR tenant_id = $1) AND ($2::text IS NULL OR project = $2)
  AND ($3::text IS NULL OR workload_id = $3) AND at >= $4 AND at < $5
ORDER BY at, entry_id LIMIT $6 OFFSET $7
"""
ENTRIES = """
SELECT e.entry_id, e.source_event_id, e.at, e.tenant_id, e.project, e.description, e.reverses_entry_id,
       json_agg(json_build_object('account', p.account, 'debit_micro', p.debit_micro,
                                  'credit_micro', p.credit_micro) ORDER BY p.posting_id) AS postings
FROM journal_entries e JOIN postings p ON p.entry_id = e.entry_id
WHERE ($1::text IS NULL OR e.tenant_id = $1) AND ($2::text IS NULL OR e.project = $2)
GROUP BY e.entry_id ORDER BY e.at, e.entry_id LIMIT $3 OFFSET $4
"""
# Fixed expressions only: the group_by parameter picks one of these, it is never spliced into SQL.
GROUPINGS: dict[str, str] = {
    "project": "e.project",
    "team": f"coalesce(nullif(a.tags->>'team', ''), '{UNTAGGED}')",
    "model": "e.resource",
    "day": "to_char(e.period_start AT TIME ZONE 'UTC', 'YYYY-MM-DD')",
    "tag": f"coalesce(nullif(a.tags->>$4::text, ''), '{UNTAGGED}')",
}
_COSTS = """
SELECT {expr} AS key, sum(e.amount_micro)::bigint AS amount_micro,
       sum(e.compute_unit_hours) AS compute_unit_hours
FROM journal_entries e JOIN allocations a ON a.allocation_id = e.allocation_id
WHERE ($1::text IS NULL OR e.tenant_id = $1) AND e.at >= $2 AND e.at < $3
GROUP BY 1 ORDER BY 1
"""
COSTS: dict[str, str] = {name: _COSTS.format(expr=expr) for name, expr in GROUPINGS.items()}
SPOT_USAGE = """
SELECT e.workload_id, e.tenant_id, a.gpu_model, a.mig_profile, a.share_of, a.pricing_class, a.tags,
       sum(e.compute_unit_hours) AS cu_hours,
       sum(extract(epoch FROM e.period_end - e.period_start) / 3600 * a.gpus
           * CASE WHEN e.reverses_entry_id IS NULL THEN 1 ELSE -1 END) AS gpu_hours
FROM journal_entries e JOIN allocations a ON a.allocation_id = e.allocation_id
WHERE e.tenant_id = $1 AND e.at >= $2 AND e.kind = 'charge'
GROUP BY e.workload_id, e.tenant_id, a.gpu_model, a.mig_profile, a.share_of, a.pricing_class, a.tags
"""
DECAYED = """
SELECT tenant_id,
       sum(compute_unit_hours * power(0.5::numeric,
           (greatest(extract(epoch FROM $1::timestamptz - period_end), 0) / $2::numeric))) AS value
FROM journal_entries
WHERE period_end > $1::timestamptz - make_interval(secs => $2::double precision * 40)
  AND ($3::text IS NULL OR tenant_id = $3)
GROUP BY tenant_id ORDER BY tenant_id
"""
_NON_CRITICAL = {"non-critical", "noncritical", "low", "best-effort"}


async def balances(conn: Conn, *, tenant_id: str | None) -> list[ProjectBalance]:
    """What each tenant project owes (debit balance of its receivable account)."""
    return [
        ProjectBalance(
            tenant_id=r["tenant_id"],
            project=r["project"],
            balance_micro=r["balance_micro"],
            entries=r["entries"],
            charged_micro=r["charged_micro"],
            credited_micro=r["credited_micro"],
        )
        for r in await conn.fetch(BALANCES, tenant_id)
    ]


async def charges(
    conn: Conn,
    *,
    tenant_id: str | None,
    project: str | None,
    workload_id: str | None,
    start: datetime,
    end: datetime,
    limit: int,
    offset: int,
) -> list[ChargeRecord]:
    """Charge lines and reversals, oldest first."""
    rows = await conn.fetch(CHARGES, tenant_id, project, workload_id, start, end, limit, offset)
    return [_charge(r) for r in rows]


async def entries_with_postings(
    conn: Conn, *, tenant_id: str | None, project: str | None, limit: int, offset: int
) -> list[JournalEntry]:
    """Journal entries with their postings."""
    return [_entry(r) for r in await conn.fetch(ENTRIES, tenant_id, project, limit, offset)]


async def costs(
    conn: Conn, *, tenant_id: str | None, group_by: str, tag: str | None, start: datetime, end: datetime
) -> list[CostGroup]:
    """Amount and compute-unit-hours per group; every charge lands in exactly one group."""
    args: list[Any] = [tenant_id, start, end]
    if group_by == "tag":
        args.append(tag)
    return [
        CostGroup(key=r["key"], amount_micro=r["amount_micro"], compute_unit_hours=r["compute_unit_hours"])
        for r in await conn.fetch(COSTS[group_by], *args)
    ]


async def spot_usages(conn: Conn, *, tenant_id: str, since: datetime) -> list[WorkloadUsage]:
    """Each workload's usage since `since`, with the tags that say whether it tolerates interruption."""
    usages = []
    for r in await conn.fetch(SPOT_USAGE, tenant_id, since):
        tags: dict[str, str] = dict(r["tags"])
        usages.append(
            WorkloadUsage(
                workload_id=r["workload_id"],
                tenant_id=r["tenant_id"],
                resource=ResourceKey(
                    gpu_model=r["gpu_model"], mig_profile=r["mig_profile"], share_of=r["share_of"]
                ),
                pricing_class=PricingClass(r["pricing_class"]),
                gpu_hours=Decimal(r["gpu_hours"]),
                compute_unit_hours=Decimal(r["cu_hours"]),
                window=timedelta(0),
                non_critical=tags.get("criticality", "").lower() in _NON_CRITICAL,
                checkpointable=tags.get("checkpointable", "").lower() in {"true", "yes", "1"},
            )
        )
    return usages


async def decayed_usage(
    conn: Conn, *, now: datetime, half_life: timedelta, tenant_id: str | None
) -> dict[str, Decimal]:
    """Decayed compute-unit-hours per tenant as of `now` (usage older than 40 half-lives is ignored)."""
    rows = await conn.fetch(DECAYED, now, Decimal(half_life.total_seconds()), tenant_id)
    return {r["tenant_id"]: Decimal(r["value"]).quantize(Decimal("0.000001")) for r in rows}


def _charge(r: asyncpg.Record) -> ChargeRecord:
    return ChargeRecord(
        entry_id=r["entry_id"],
        source_event_id=r["source_event_id"],
        at=r["at"],
        tenant_id=r["tenant_id"],
        project=r["project"],
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
        reverses_entry_id=r["reverses_entry_id"],
        kind=r["kind"],
        opened_by_event_id=r["opened_by_event_id"],
        closed_by_event_id=r["closed_by_event_id"],
        incident_id=r["incident_id"],
    )


def _entry(r: asyncpg.Record) -> JournalEntry:
    return JournalEntry(
        entry_id=r["entry_id"],
        source_event_id=r["source_event_id"],
        at=r["at"],
        description=r["description"],
        tenant_id=r["tenant_id"],
        project=r["project"],
        postings=tuple(
            Posting(account=p["account"], debit_micro=p["debit_micro"], credit_micro=p["credit_micro"])
            for p in r["postings"]
        ),
        reverses_entry_id=r["reverses_entry_id"],
    )
