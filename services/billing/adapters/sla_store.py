"""Postgres access for SLA policies, the incidents and moves billing learned, and credit decisions
(never commits)."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any, TypeAlias

import asyncpg

from services.billing.domain.sla import CreditDecision, FaultClass, Incident, SlaPolicy, WorkloadMove

__all__ = ["SlaStore"]

Conn: TypeAlias = "asyncpg.Connection[Any]"

SELECT_POLICY = "SELECT fault_classes, credit_rate, monthly_cap_micro FROM sla_policies WHERE tenant_id = $1"
UPSERT_POLICY = (
    "INSERT INTO sla_policies (tenant_id, fault_classes, credit_rate, monthly_cap_micro) "
    "VALUES ($1, $2, $3, $4) ON CONFLICT (tenant_id) DO UPDATE SET fault_classes = $2, credit_rate = $3, "
    "monthly_cap_micro = $4, updated_at = now()"
)
INSERT_INCIDENT = (
    "INSERT INTO incidents (incident_id, fault_type, node, gpu_uuid, severity, detected_at, opened_event_id) "
    "VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (incident_id) DO NOTHING"
)
CLOSE_INCIDENT = (
    "UPDATE incidents SET outcome = $2, closed_at = $3, closed_event_id = $4 "
    "WHERE incident_id = $1 AND closed_at IS NULL"
)
SELECT_INCIDENT = "SELECT * FROM incidents WHERE incident_id = $1"
INSERT_MOVE = (
    "INSERT INTO workload_moves (event_id, workload_id, tenant_id, from_placement_id, to_placement_id, "
    "incident_id, reason, at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (event_id) DO NOTHING"
)
MOVES_FOR_INCIDENT = "SELECT * FROM workload_moves WHERE incident_id = $1 ORDER BY at, event_id"
MOVES_INTO = (
    "SELECT * FROM workload_moves WHERE to_placement_id = $1 AND incident_id IS NOT NULL "
    "ORDER BY at, event_id"
)
SELECT_DECISION = "SELECT * FROM sla_credits WHERE incident_id = $1 AND workload_id = $2"
#: Credits of one tenant are decided one at a time, so two at once cannot both fit under one cap.
LOCK_TENANT = "SELECT pg_advisory_xact_lock(hashtextextended('billing.sla:' || $1, 0))"
CREDITED_BETWEEN = (
    "SELECT coalesce(sum(amount_micro), 0)::bigint FROM sla_credits "
    "WHERE tenant_id = $1 AND running_at >= $2 AND running_at < $3"
)
INSERT_DECISION = """
INSERT INTO sla_credits (incident_id, workload_id, tenant_id, project, from_placement_id, to_placement_id,
    fault_type, fault_class, detected_at, running_at, eligible, reason, credit_rate, lost_micro, amount_micro,
    capped, entry_id, opened_event_id, migrating_event_id, running_event_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)
ON CONFLICT (incident_id, workload_id) DO NOTHING RETURNING 1
"""


class SlaStore:
    """SLA policies, incidents, moves and credit decisions."""

    def __init__(self, conn: Conn) -> None:
        self._conn = conn

    async def policy(self, tenant_id: str) -> SlaPolicy | None:
        """The tenant's own policy; None when it has the default."""
        row = await self._conn.fetchrow(SELECT_POLICY, tenant_id)
        if row is None:
            return None
        return SlaPolicy(
            fault_classes=frozenset(FaultClass(c) for c in row["fault_classes"]),
            credit_rate=Decimal(row["credit_rate"]),
            monthly_cap_micro=row["monthly_cap_micro"],
        )

    async def put_policy(self, tenant_id: str, policy: SlaPolicy) -> None:
        """Set (or replace) the tenant's policy; decisions already made keep the policy they were made by."""
        classes = sorted(c.value for c in policy.fault_classes)
        await self._conn.execute(
            UPSERT_POLICY, tenant_id, classes, policy.credit_rate, policy.monthly_cap_micro
        )

    async def record_incident(self, incident: Incident) -> None:
        """Keep an incident once (a redelivered opening changes nothing)."""
        i = incident
        await self._conn.execute(
            INSERT_INCIDENT,
            i.incident_id,
            i.fault_type,
            i.node,
            i.gpu_uuid,
            i.severity,
            i.detected_at,
            i.opened_event_id,
        )

    async def close_incident(self, incident_id: str, *, outcome: str, at: datetime, event_id: str) -> None:
        """Record how and when a known incident ended (the first close wins)."""
        await self._conn.execute(CLOSE_INCIDENT, incident_id, outcome, at, event_id)

    async def incident(self, incident_id: str) -> Incident | None:
        """An incident billing learned, if it did."""
        row = await self._conn.fetchrow(SELECT_INCIDENT, incident_id)
        return None if row is None else incident_from_row(row)

    async def record_move(self, move: WorkloadMove) -> None:
        """Keep a move once."""
        m = move
        await self._conn.execute(
            INSERT_MOVE,
            m.event_id,
            m.workload_id,
            m.tenant_id,
            m.from_placement_id,
            m.to_placement_id,
            m.incident_id,
            m.reason,
            m.at,
        )

    async def moves_for_incident(self, incident_id: str) -> list[WorkloadMove]:
        """The moves an incident caused, oldest first."""
        return [move_from_row(r) for r in await self._conn.fetch(MOVES_FOR_INCIDENT, incident_id)]

    async def moves_into(self, placement_id: str) -> list[WorkloadMove]:
        """The incident moves whose new placement is `placement_id`."""
        return [move_from_row(r) for r in await self._conn.fetch(MOVES_INTO, placement_id)]

    async def decision(self, incident_id: str, workload_id: str) -> CreditDecision | None:
        """The credit decision of one (incident, workload), if made."""
        row = await self._conn.fetchrow(SELECT_DECISION, incident_id, workload_id)
        return None if row is None else decision_from_row(row)

    async def credited_between(self, tenant_id: str, *, start: datetime, end: datetime) -> int:
        """Micro-units credited to a tenant for recoveries in [start, end); holds the tenant's credit lock
        until the transaction ends."""
        await self._conn.execute(LOCK_TENANT, tenant_id)
        total: int = await self._conn.fetchval(CREDITED_BETWEEN, tenant_id, start, end)
        return total

    async def record_decision(self, decision: CreditDecision) -> bool:
        """Keep a decision once; False when that (incident, workload) was decided before."""
        d = decision
        return bool(
            await self._conn.fetchval(
                INSERT_DECISION,
                d.incident_id,
                d.workload_id,
                d.tenant_id,
                d.project,
                d.from_placement_id,
                d.to_placement_id,
                d.fault_type,
                d.fault_class,
                d.detected_at,
                d.running_at,
                d.eligible,
                d.reason,
                d.credit_rate,
                d.lost_micro,
                d.amount_micro,
                d.capped,
                d.entry_id,
                d.opened_event_id,
                d.migrating_event_id,
                d.running_event_id,
            )
        )


def incident_from_row(r: asyncpg.Record) -> Incident:
    """An incidents row as the domain's Incident."""
    return Incident(
        incident_id=r["incident_id"],
        fault_type=r["fault_type"],
        node=r["node"],
        gpu_uuid=r["gpu_uuid"],
        severity=r["severity"],
        detected_at=r["detected_at"],
        opened_event_id=r["opened_event_id"],
        outcome=r["outcome"],
        closed_at=r["closed_at"],
        closed_event_id=r["closed_event_id"],
    )


def move_from_row(r: asyncpg.Record) -> WorkloadMove:
    """A workload_moves row as the domain's WorkloadMove."""
    return WorkloadMove(
        event_id=r["event_id"],
        workload_id=r["workload_id"],
        tenant_id=r["tenant_id"],
        from_placement_id=r["from_placement_id"],
        to_placement_id=r["to_placement_id"],
        incident_id=r["incident_id"],
        reason=r["reason"],
        at=r["at"],
    )


def decision_from_row(r: asyncpg.Record) -> CreditDecision:
    """An sla_credits row as the domain's CreditDecision."""
    return CreditDecision(
        incident_id=r["incident_id"],
        workload_id=r["workload_id"],
        tenant_id=r["tenant_id"],
        project=r["project"],
        from_placement_id=r["from_placement_id"],
        to_placement_id=r["to_placement_id"],
        fault_type=r["fault_type"],
        fault_class=r["fault_class"],
        detected_at=r["detected_at"],
        running_at=r["running_at"],
        eligible=r["eligible"],
        reason=r["reason"],
        credit_rate=Decimal(r["credit_rate"]),
        lost_micro=r["lost_micro"],
        amount_micro=r["amount_micro"],
        capped=r["capped"],
        opened_event_id=r["opened_event_id"],
        migrating_event_id=r["migrating_event_id"],
        running_event_id=r["running_event_id"],
        entry_id=r["entry_id"],
    )
