"""Postgres access for allocations, the lifecycle facts they come from and idle state (never commits)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, TypeAlias

import asyncpg

from services.billing.domain.host_facts import HostFact, HostFactKind
from services.billing.domain.idle import IdleState
from services.billing.domain.prices import PricingClass, ResourceKey
from services.billing.domain.rating import Allocation, EndReason
from services.billing.domain.reconciliation import FactKind, PlacementFact

__all__ = ["AllocationRow", "AllocationStore"]

Conn: TypeAlias = "asyncpg.Connection[Any]"

INSERT_ALLOCATION = (
    "INSERT INTO allocations (allocation_id, placement_id, workload_id, tenant_id, project, kind, gpu_model, "
    "mig_profile, share_of, pricing_class, compute_units, gpus, tags, started_at, rated_until, running) "
    "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $14, false) "
    "ON CONFLICT (allocation_id) DO NOTHING RETURNING 1"
)
#: Charging starts when the host runs the placement: from then on, once; the running event that said so
#: is kept (it opens the billed interval of every charge line).
START_PLACEMENT = (
    "UPDATE allocations SET running = true, started_at = $2, rated_until = $2, running_event_id = "
    "(SELECT event_id FROM lifecycle_facts WHERE placement_id = $1 AND kind = 'running' "
    "ORDER BY at, fact_id LIMIT 1) "
    "WHERE placement_id = $1 AND status = 'open' AND NOT running RETURNING allocation_id"
)
LOCK_WORKLOAD_OPEN = (
    "SELECT * FROM allocations WHERE workload_id = $1 AND status = 'open' ORDER BY allocation_id FOR UPDATE"
)
LOCK_PLACEMENT = "SELECT * FROM allocations WHERE placement_id = $1 ORDER BY allocation_id FOR UPDATE"
LOCK_DUE = (
    "SELECT * FROM allocations WHERE status = 'open' AND running AND rated_until < $1 "
    "ORDER BY rated_until, allocation_id LIMIT $2 FOR UPDATE SKIP LOCKED"
)
SET_RATED = "UPDATE allocations SET rated_until = $2 WHERE allocation_id = $1"
CLOSE_ALLOCATION = (
    "UPDATE allocations SET status = 'closed', ended_at = $2, end_reason = $3, rated_until = $4, "
    "ended_event_id = $5 WHERE allocation_id = $1"
)
SELECT_ALLOCATIONS = "SELECT * FROM allocations ORDER BY allocation_id"
INSERT_FACT = (
    "INSERT INTO lifecycle_facts (event_id, kind, placement_id, at, end_reason) VALUES ($1, $2, $3, $4, $5) "
    "ON CONFLICT DO NOTHING"
)
FIRST_END_FACT = (
    "SELECT at, end_reason, event_id FROM lifecycle_facts "
    "WHERE placement_id = $1 AND kind = 'ended' ORDER BY at, fact_id LIMIT 1"
)
FIRST_RUNNING_FACT = "SELECT min(at) FROM lifecycle_facts WHERE placement_id = $1 AND kind = 'running'"
SELECT_FACTS = "SELECT kind, placement_id, at, end_reason FROM lifecycle_facts ORDER BY fact_id"
INSERT_HOST_FACT = (
    "INSERT INTO host_facts (kind, workload_id, tenant_id, placement_id, node, at, outcome, event_id, "
    "event_type) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING"
)
SELECT_HOST_FACTS = (
    "SELECT kind, workload_id, tenant_id, placement_id, node, at, outcome FROM host_facts ORDER BY fact_id"
)
SELECT_WORKLOAD = (
    "SELECT tenant_id, kind FROM allocations WHERE workload_id = $1 AND status = 'open' AND running LIMIT 1"
)
SELECT_IDLE = "SELECT * FROM idle_state WHERE workload_id = $1"
UPSERT_IDLE = (
    "INSERT INTO idle_state (workload_id, tenant_id, idle_since, observed_until, warned_at, "
    "release_requested_at) VALUES ($1, $2, $3, $4, $5, $6) "
    "ON CONFLICT (workload_id) DO UPDATE SET idle_since = $3, "
    "observed_until = $4, warned_at = $5, release_requested_at = $6"
)
INSERT_IDLE_ACTION = (
    "INSERT INTO idle_actions (workload_id, tenant_id, stage, idle_hours, at) VALUES ($1, $2, $3, $4, $5) "
    "ON CONFLICT DO NOTHING"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class AllocationRow:
    """An allocation as stored: the domain object plus how far it is rated and whether it is open."""

    allocation: Allocation
    placement_id: str
    kind: str
    rated_until: datetime
    open: bool
    running: bool  # the host runs it (charged from allocation.started_at); False: held, not yet charged
    running_event_id: str | None = None  # the running event that started its charging
    ended_event_id: str | None = None  # the event that ended it


class AllocationStore:
    """Allocations and the lifecycle facts they come from."""

    def __init__(self, conn: Conn) -> None:
        self._conn = conn

    async def open_allocation(self, *, allocation: Allocation, placement_id: str, kind: str) -> bool:
        """Insert an open allocation, held but not running (nothing charged until ``start_placement``);
        False when it already exists (a redelivered placement)."""
        a, r = allocation, allocation.resource
        return bool(
            await self._conn.fetchval(
                INSERT_ALLOCATION,
                a.allocation_id,
                placement_id,
                a.workload_id,
                a.tenant_id,
                a.project,
                kind,
                r.gpu_model,
                r.mig_profile,
                r.share_of,
                a.pricing_class.value,
                a.compute_units,
                a.gpus,
                dict(a.tags),
                a.started_at,
            )
        )

    async def start_placement(self, placement_id: str, *, at: datetime) -> list[str]:
        """Start charging a placement's open allocations that do not run yet, from `at`; returns the ids
        started now (none when it runs already, has ended or is unknown)."""
        return [r["allocation_id"] for r in await self._conn.fetch(START_PLACEMENT, placement_id, at)]

    async def lock_placement(self, placement_id: str) -> list[AllocationRow]:
        """A placement's allocations, locked until the transaction ends."""
        return [_allocation_row(r) for r in await self._conn.fetch(LOCK_PLACEMENT, placement_id)]

    async def lock_open_of_workload(self, workload_id: str) -> list[AllocationRow]:
        """Every open allocation of a workload (any placement), by id, locked until the transaction ends."""
        return [_allocation_row(r) for r in await self._conn.fetch(LOCK_WORKLOAD_OPEN, workload_id)]

    async def lock_due(self, *, before: datetime, limit: int) -> list[AllocationRow]:
        """Open allocations rated short of `before`, skipping any another transaction holds."""
        return [_allocation_row(r) for r in await self._conn.fetch(LOCK_DUE, before, limit)]

    async def set_rated(self, allocation_id: str, rated_until: datetime) -> None:
        """Record how far an open allocation is rated."""
        await self._conn.execute(SET_RATED, allocation_id, rated_until)

    async def close(
        self, allocation: Allocation, *, rated_until: datetime, ended_event_id: str | None = None
    ) -> None:
        """Mark an allocation ended by the event `ended_event_id` (its final charges are posted in the same
        transaction)."""
        reason = allocation.end_reason.value if allocation.end_reason else None
        await self._conn.execute(
            CLOSE_ALLOCATION,
            allocation.allocation_id,
            allocation.ended_at,
            reason,
            rated_until,
            ended_event_id,
        )

    async def all_allocations(self) -> list[AllocationRow]:
        """Every allocation (reconciliation)."""
        return [_allocation_row(r) for r in await self._conn.fetch(SELECT_ALLOCATIONS)]

    async def record_fact(
        self,
        *,
        event_id: str,
        kind: str,
        placement_id: str,
        at: datetime,
        end_reason: EndReason | None = None,
    ) -> None:
        """Append a lifecycle fact as received."""
        reason = end_reason.value if end_reason else None
        await self._conn.execute(INSERT_FACT, event_id, kind, placement_id, at, reason)

    async def first_end(self, placement_id: str) -> tuple[datetime, EndReason] | None:
        """The earliest end fact of a placement, if one arrived."""
        row = await self._conn.fetchrow(FIRST_END_FACT, placement_id)
        return (row["at"], EndReason(row["end_reason"])) if row else None

    async def first_end_event(self, placement_id: str) -> str | None:
        """The id of the event behind the earliest end fact of a placement, if one arrived."""
        row = await self._conn.fetchrow(FIRST_END_FACT, placement_id)
        return None if row is None else str(row["event_id"])

    async def first_running(self, placement_id: str) -> datetime | None:
        """The earliest running fact of a placement, if one arrived."""
        at: datetime | None = await self._conn.fetchval(FIRST_RUNNING_FACT, placement_id)
        return at

    async def record_host_fact(self, *, event_id: str, fact: HostFact, event_type: str | None = None) -> None:
        """Keep a node agent's report (once per placement, kind and instant) and the event it came in."""
        await self._conn.execute(
            INSERT_HOST_FACT,
            fact.kind.value,
            fact.workload_id,
            fact.tenant_id,
            fact.placement_id,
            fact.node,
            fact.at,
            fact.outcome,
            event_id,
            event_type,
        )

    async def host_facts(self) -> list[HostFact]:
        """Every host fact, in arrival order (reconciliation)."""
        return [
            HostFact(
                kind=HostFactKind(r["kind"]),
                workload_id=r["workload_id"],
                tenant_id=r["tenant_id"],
                placement_id=r["placement_id"],
                node=r["node"],
                at=r["at"],
                outcome=r["outcome"],
            )
            for r in await self._conn.fetch(SELECT_HOST_FACTS)
        ]

    async def facts(self) -> list[PlacementFact]:
        """Every lifecycle fact, in arrival order."""
        return [
            PlacementFact(
                kind=FactKind(r["kind"]),
                placement_id=r["placement_id"],
                at=r["at"],
                end_reason=EndReason(r["end_reason"]) if r["end_reason"] else None,
            )
            for r in await self._conn.fetch(SELECT_FACTS)
        ]

    async def open_workload(self, workload_id: str) -> tuple[str, str] | None:
        """(tenant, kind) of a workload with an open allocation that runs."""
        row = await self._conn.fetchrow(SELECT_WORKLOAD, workload_id)
        return (row["tenant_id"], row["kind"]) if row else None

    async def idle_state(self, workload_id: str) -> IdleState:
        """What the idle detector remembers about a workload."""
        row = await self._conn.fetchrow(SELECT_IDLE, workload_id)
        if row is None:
            return IdleState()
        return IdleState(
            idle_since=row["idle_since"],
            observed_until=row["observed_until"],
            warned_at=row["warned_at"],
            release_requested_at=row["release_requested_at"],
        )

    async def save_idle(self, *, workload_id: str, tenant_id: str, state: IdleState) -> None:
        """Store the idle detector's state for a workload."""
        await self._conn.execute(
            UPSERT_IDLE,
            workload_id,
            tenant_id,
            state.idle_since,
            state.observed_until,
            state.warned_at,
            state.release_requested_at,
        )

    async def record_idle_action(
        self, *, workload_id: str, tenant_id: str, stage: str, idle_hours: float, at: datetime
    ) -> None:
        """Keep a record of a warning or release request."""
        await self._conn.execute(INSERT_IDLE_ACTION, workload_id, tenant_id, stage, idle_hours, at)


def _allocation_row(r: asyncpg.Record) -> AllocationRow:
    allocation = Allocation(
        allocation_id=r["allocation_id"],
        workload_id=r["workload_id"],
        tenant_id=r["tenant_id"],
        project=r["project"],
        resource=ResourceKey(gpu_model=r["gpu_model"], mig_profile=r["mig_profile"], share_of=r["share_of"]),
        pricing_class=PricingClass(r["pricing_class"]),
        compute_units=Decimal(r["compute_units"]),
        gpus=Decimal(r["gpus"]),
        started_at=r["started_at"],
        tags=dict(r["tags"]),
        ended_at=r["ended_at"],
        end_reason=EndReason(r["end_reason"]) if r["end_reason"] else None,
    )
    return AllocationRow(
        allocation=allocation,
        placement_id=r["placement_id"],
        kind=r["kind"],
        rated_until=r["rated_until"],
        open=r["status"] == "open",
        running=r["running"],
        running_event_id=r["running_event_id"],
        ended_event_id=r["ended_event_id"],
    )
