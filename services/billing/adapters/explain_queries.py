"""Read-side queries that explain one ledger entry: the events behind it, its price, its routing, and
the SLA credits and incidents that touch it; and the credit decisions a tenant sees."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, TypeAlias

import asyncpg

from services.billing.adapters.sla_store import decision_from_row, incident_from_row, move_from_row
from services.billing.domain.sla import CreditDecision, Incident, WorkloadMove

__all__ = ["credit_decisions", "explain_entry"]

Conn: TypeAlias = "asyncpg.Connection[Any] | asyncpg.Pool[Any]"

ENTRY = "SELECT * FROM journal_entries WHERE entry_id = $1 AND ($2::text IS NULL OR tenant_id = $2)"
ALLOCATION = "SELECT * FROM allocations WHERE allocation_id = $1"
PRICE = "SELECT price_id, basis, micro_per_hour, effective_from, effective_to FROM prices WHERE price_id = $1"
FACTS = (
    "SELECT f.event_id, f.kind, f.placement_id, f.at, f.end_reason, "
    "EXISTS (SELECT 1 FROM lifecycle_facts r WHERE r.event_id = f.event_id AND r.kind = 'running' "
    "AND r.placement_id <> f.placement_id) AS by_move "
    "FROM lifecycle_facts f WHERE f.placement_id = ANY($1) ORDER BY f.at, f.fact_id"
)
HOST_FACTS = (
    "SELECT event_id, event_type, kind, placement_id, node, at, outcome FROM host_facts "
    "WHERE placement_id = ANY($1) ORDER BY at, fact_id"
)
MOVES = (
    "SELECT * FROM workload_moves WHERE from_placement_id = ANY($1) OR to_placement_id = ANY($1) "
    "ORDER BY at, event_id"
)
CREDITS_OF = (
    "SELECT * FROM sla_credits WHERE from_placement_id = ANY($1) OR to_placement_id = ANY($1) "
    "OR incident_id = $2 ORDER BY running_at, incident_id"
)
INCIDENTS = "SELECT * FROM incidents WHERE incident_id = ANY($1) ORDER BY detected_at"
TENANT_CREDITS = (
    "SELECT * FROM sla_credits WHERE ($1::text IS NULL OR tenant_id = $1) "
    "AND running_at >= $2 AND running_at < $3 "
    "ORDER BY running_at, incident_id, workload_id LIMIT $4 OFFSET $5"
)
_SCHEDULER = "scheduler.workload.{}.v1"


async def credit_decisions(
    conn: Conn, *, tenant_id: str | None, start: datetime, end: datetime, limit: int, offset: int
) -> list[CreditDecision]:
    """Credit decisions (credited or not, with the reason) for recoveries in [start, end)."""
    rows = await conn.fetch(TENANT_CREDITS, tenant_id, start, end, limit, offset)
    return [decision_from_row(r) for r in rows]


async def explain_entry(conn: Conn, *, entry_id: str, tenant_id: str | None) -> dict[str, Any] | None:
    """What is behind one entry, or None when it is not the tenant's (or does not exist)."""
    entry = await conn.fetchrow(ENTRY, entry_id, tenant_id)
    if entry is None:
        return None
    allocation = await conn.fetchrow(ALLOCATION, entry["allocation_id"])
    placement = allocation["placement_id"] if allocation else None
    moves = [move_from_row(r) for r in await conn.fetch(MOVES, [placement])] if placement else []
    placements = sorted(
        {p for p in [placement] if p} | {p for m in moves for p in (m.from_placement_id, m.to_placement_id)}
    )
    credits = [decision_from_row(r) for r in await conn.fetch(CREDITS_OF, placements, entry["incident_id"])]
    incident_ids = sorted({c.incident_id for c in credits} | {m.incident_id for m in moves if m.incident_id})
    incidents = [incident_from_row(r) for r in await conn.fetch(INCIDENTS, incident_ids)]
    events = await _events(conn, placements) + _move_events(moves) + _incident_events(incidents)
    events.sort(key=lambda e: (e["at"], e["type"]))
    by_id = {e["event_id"]: e for e in events}
    price = await conn.fetchrow(PRICE, entry["price_id"])
    return {
        "entry": _entry(entry),
        "opened_by": by_id.get(entry["opened_by_event_id"] or _alloc(allocation, "running_event_id")),
        "closed_by": by_id.get(entry["closed_by_event_id"] or _alloc(allocation, "ended_event_id")),
        "price": None if price is None else dict(price),
        "routing": _routing(entry, allocation),
        "events": events,
        "credits": [credit_view(c) for c in credits],
        "incidents": [_incident(i) for i in incidents],
    }


def _incident(i: Incident) -> dict[str, Any]:
    return {
        "incident_id": i.incident_id,
        "fault_type": i.fault_type,
        "node": i.node,
        "gpu_uuid": i.gpu_uuid,
        "severity": i.severity,
        "detected_at": i.detected_at,
        "outcome": i.outcome,
        "closed_at": i.closed_at,
    }


def _move_events(moves: list[WorkloadMove]) -> list[dict[str, Any]]:
    return [
        _event(
            m.event_id,
            "scheduler.workload.migrating.v1",
            m.at,
            "scheduler",
            m.from_placement_id,
            f"to {m.to_placement_id}, incident {m.incident_id}",
        )
        for m in moves
    ]


def _incident_events(incidents: list[Incident]) -> list[dict[str, Any]]:
    out = []
    for i in incidents:
        what = f"{i.incident_id}: {i.fault_type} on {i.node}"
        out.append(
            _event(i.opened_event_id, "recovery.incident.opened.v1", i.detected_at, "recovery", None, what)
        )
        if i.closed_event_id and i.closed_at:
            what = f"{i.incident_id}: {i.outcome}"
            out.append(
                _event(i.closed_event_id, "recovery.incident.closed.v1", i.closed_at, "recovery", None, what)
            )
    return out


def credit_view(c: CreditDecision) -> dict[str, Any]:
    """A credit decision as the API shows it."""
    return {
        "incident_id": c.incident_id,
        "workload_id": c.workload_id,
        "project": c.project,
        "fault_type": c.fault_type,
        "fault_class": c.fault_class,
        "eligible": c.eligible,
        "reason": c.reason,
        "detected_at": c.detected_at,
        "running_at": c.running_at,
        "lost_seconds": c.lost_seconds,
        "lost_micro": c.lost_micro,
        "credit_rate": str(c.credit_rate),
        "amount_micro": c.amount_micro,
        "capped": c.capped,
        "entry_id": c.entry_id,
        "from_placement_id": c.from_placement_id,
        "to_placement_id": c.to_placement_id,
    }


async def _events(conn: Conn, placements: list[str]) -> list[dict[str, Any]]:
    out = []
    for r in await conn.fetch(FACTS, placements):
        kind = "running" if r["by_move"] else r["kind"]  # a move's end is the new placement's running
        detail = r["kind"] + (f" ({r['end_reason']})" if r["end_reason"] else "")
        out.append(
            _event(r["event_id"], _SCHEDULER.format(kind), r["at"], "scheduler", r["placement_id"], detail)
        )
    for r in await conn.fetch(HOST_FACTS, placements):
        detail = r["kind"] + (f" ({r['outcome']})" if r["outcome"] else "")
        kind = r["event_type"] or f"telemetry.agent ({r['kind']})"
        out.append(_event(r["event_id"], kind, r["at"], f"node agent {r['node']}", r["placement_id"], detail))
    return out


def _event(
    event_id: str, kind: str, at: datetime, source: str, placement_id: str | None, detail: str
) -> dict[str, Any]:
    return {
        "event_id": event_id,
        "type": kind,
        "at": at.astimezone(UTC),
        "source": source,
        "placement_id": placement_id,
        "detail": detail,
    }


def _alloc(allocation: asyncpg.Record | None, column: str) -> Any:
    return None if allocation is None else allocation[column]


def _routing(entry: asyncpg.Record, allocation: asyncpg.Record | None) -> dict[str, Any]:
    tags: dict[str, str] = dict(allocation["tags"]) if allocation else {}
    return {
        "project": entry["project"],
        "tags": tags,
        "rule": "the `project` tag (the workload's own, else the tenant's default tags)"
        if "project" in tags
        else "no `project` tag: the untagged charges",
    }


def _entry(r: asyncpg.Record) -> dict[str, Any]:
    keys = (
        "entry_id", "source_event_id", "kind", "at", "tenant_id", "project", "description", "allocation_id",
        "workload_id", "resource", "pricing_class", "period_start", "period_end", "basis", "quantity_hours",
        "compute_unit_hours", "price_id", "micro_per_hour", "amount_micro", "reverses_entry_id",
        "opened_by_event_id", "closed_by_event_id", "incident_id",
    )  # fmt: skip
    return {k: r[k] for k in keys}
