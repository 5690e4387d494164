"""Postgres access for recovery: incidents, the placement map and GPU health. Never commits."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeAlias

import asyncpg

from services.recovery.incidents import Incident, IncidentState

__all__ = ["IncidentFilter", "IncidentStore", "Placement", "PlacementStore"]

Conn: TypeAlias = "asyncpg.Connection[Any] | asyncpg.pool.PoolConnectionProxy[Any]"

UPSERT_INCIDENT = """
INSERT INTO incidents (incident_id, state, fault_type, gpu_uuid, node, tenants, fault_at, detected_at,
                       last_seen, recovered_at, closed_at, settle_until, doc)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
ON CONFLICT (incident_id) DO UPDATE SET
    state = EXCLUDED.state, last_seen = EXCLUDED.last_seen,
    tenants = ARRAY(SELECT DISTINCT t FROM unnest(incidents.tenants || EXCLUDED.tenants) AS t ORDER BY t),
    recovered_at = EXCLUDED.recovered_at, closed_at = EXCLUDED.closed_at,
    settle_until = CASE WHEN EXCLUDED.state = 'verifying'
                        THEN COALESCE(EXCLUDED.settle_until, incidents.settle_until) END,
    doc = EXCLUDED.doc, updated_at = now()
"""
INSERT_INCIDENT_WORKLOAD = """
INSERT INTO incident_workloads (incident_id, workload_id, tenant_id) VALUES ($1, $2, $3)
ON CONFLICT DO NOTHING
"""
SELECT_INCIDENT = "SELECT doc FROM incidents WHERE incident_id = $1"
SELECT_INCIDENT_TENANTS = "SELECT tenants FROM incidents WHERE incident_id = $1"
SELECT_WORKLOAD_TENANTS = "SELECT workload_id, tenant_id FROM incident_workloads WHERE incident_id = $1"
# Incidents on a node that are open or recent: fold targets and correlation input, newest first.
SELECT_RECENT_ON_NODE = """
SELECT doc FROM incidents WHERE node = $1 AND (closed_at IS NULL OR last_seen >= $2)
ORDER BY last_seen DESC LIMIT 200 FOR UPDATE
"""
SELECT_OPEN_IN_STATE_ON_NODE = """
SELECT doc FROM incidents WHERE node = $1 AND state = ANY ($2::text[]) AND closed_at IS NULL
ORDER BY detected_at, incident_id FOR UPDATE
"""
# Escalated incidents on a node, newest first: the ones that may have left a GPU drained for a person.
SELECT_ESCALATED_ON_NODE = """
SELECT doc FROM incidents WHERE node = $1 AND state = 'escalated'
ORDER BY closed_at DESC LIMIT $2 FOR UPDATE
"""
SELECT_MIGRATING_FOR_WORKLOAD = """
SELECT i.doc FROM incidents i JOIN incident_workloads w USING (incident_id)
WHERE w.workload_id = $1 AND i.state = 'migrating' FOR UPDATE OF i
"""
# SKIP LOCKED: with several replicas each due incident is handled by one of them.
SELECT_DUE_DEADLINE = """
SELECT doc FROM incidents WHERE closed_at IS NULL AND detected_at <= $1
ORDER BY detected_at LIMIT $2 FOR UPDATE SKIP LOCKED
"""
SELECT_DUE_SETTLE = """
SELECT doc FROM incidents WHERE state = 'verifying' AND settle_until <= $1
ORDER BY settle_until LIMIT $2 FOR UPDATE SKIP LOCKED
"""
SELECT_LIST = """
SELECT doc FROM incidents
WHERE ($1::text IS NULL OR state = $1) AND ($2::text IS NULL OR node = $2)
  AND ($3::text IS NULL OR gpu_uuid = $3) AND ($4::text IS NULL OR fault_type = $4)
  AND ($5::text IS NULL OR $5 = ANY (tenants))
ORDER BY detected_at DESC, incident_id LIMIT $6 OFFSET $7
"""
SELECT_FOR_SLO = """
SELECT doc FROM incidents
WHERE fault_at >= $1 AND ($2::text IS NULL OR fault_type = $2) AND ($3::text IS NULL OR $3 = ANY (tenants))
"""
UPSERT_PLACEMENT = """
INSERT INTO placements (workload_id, tenant_id, placement_id, node, gpus, priority)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (workload_id) DO UPDATE SET tenant_id = EXCLUDED.tenant_id, placement_id = EXCLUDED.placement_id,
    node = EXCLUDED.node, gpus = EXCLUDED.gpus, priority = EXCLUDED.priority, updated_at = now()
"""
DELETE_PLACEMENT = "DELETE FROM placements WHERE workload_id = $1 AND placement_id = $2"
SELECT_PLACEMENTS_ON_GPU = "SELECT * FROM placements WHERE $1 = ANY (gpus) ORDER BY workload_id"
SELECT_PLACEMENTS_ON_NODE = "SELECT * FROM placements WHERE node = $1 ORDER BY workload_id"
SELECT_PLACEMENTS = "SELECT * FROM placements WHERE workload_id = ANY ($1::text[])"
UPSERT_HEALTH = """
INSERT INTO gpu_health (gpu_uuid, node, health) VALUES ($1, $2, $3)
ON CONFLICT (gpu_uuid) DO UPDATE SET node = EXCLUDED.node, health = EXCLUDED.health, updated_at = now()
"""
# GPUs another incident still holds out of service: open, or escalated to a person.
SELECT_HELD_GPUS_ON_NODE = """
SELECT DISTINCT gpu_uuid FROM incidents
WHERE node = $1 AND incident_id <> $2 AND gpu_uuid IS NOT NULL AND (closed_at IS NULL OR state = 'escalated')
"""
SELECT_HOLDING_GPU = """
SELECT incident_id FROM incidents
WHERE gpu_uuid = $1 AND incident_id <> $2 AND (closed_at IS NULL OR (state = 'escalated' AND closed_at >= $3))
ORDER BY incident_id
"""
SELECT_HEALTH = "SELECT gpu_uuid, health FROM gpu_health WHERE gpu_uuid = ANY ($1::text[])"
SELECT_OUT_OF_SERVICE_ON_NODE = """
SELECT gpu_uuid FROM gpu_health WHERE node = $1 AND health IN ('draining', 'failed') ORDER BY gpu_uuid
"""


@dataclass(frozen=True, slots=True)
class Placement:
    """Where one workload runs now."""

    workload_id: str
    tenant_id: str
    placement_id: str
    node: str
    gpus: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class IncidentFilter:
    """Filters of the incident list; None means any."""

    state: str | None = None
    node: str | None = None
    gpu: str | None = None
    fault_type: str | None = None
    tenant: str | None = None


def _incidents(rows: Sequence[asyncpg.Record]) -> list[Incident]:
    return [Incident.model_validate(r["doc"]) for r in rows]


class IncidentStore:
    """Incidents, stored whole as JSONB with indexed columns beside them."""

    def __init__(self, conn: Conn) -> None:
        self._conn = conn

    async def save(
        self, incident: Incident, *, tenants: Mapping[str, str], settle_until: datetime | None = None
    ) -> None:
        """Insert or update an incident; tenants maps its workloads to their tenants."""
        i = incident
        await self._conn.execute(
            UPSERT_INCIDENT, i.id, i.state.value, i.fault_type, i.gpu, i.node,
            sorted(set(tenants.values())), i.fault_at, i.detected_at, i.last_seen, i.recovered_at,
            i.closed_at, settle_until, i.model_dump(mode="json"),
        )  # fmt: skip
        rows = [(i.id, w, tenants.get(w)) for w in i.workload_ids]
        if rows:
            await self._conn.executemany(INSERT_INCIDENT_WORKLOAD, rows)

    async def get(self, incident_id: str) -> tuple[Incident, list[str]] | None:
        """An incident and the tenants it affects."""
        doc = await self._conn.fetchval(SELECT_INCIDENT, incident_id)
        if doc is None:
            return None
        tenants = await self._conn.fetchval(SELECT_INCIDENT_TENANTS, incident_id)
        return Incident.model_validate(doc), list(tenants or [])

    async def workload_tenants(self, incident_id: str) -> dict[str, str | None]:
        """The tenant of each workload the incident moves."""
        rows = await self._conn.fetch(SELECT_WORKLOAD_TENANTS, incident_id)
        return {r["workload_id"]: r["tenant_id"] for r in rows}

    async def recent_on_node(self, node: str, *, since: datetime) -> list[Incident]:
        """Open incidents on the node and those seen since ``since``, newest first (locked)."""
        return _incidents(await self._conn.fetch(SELECT_RECENT_ON_NODE, node, since))

    async def open_in_state(self, node: str, *states: IncidentState) -> list[Incident]:
        """Open incidents on a node in any of the given states, oldest first (locked)."""
        values = [state.value for state in states]
        return _incidents(await self._conn.fetch(SELECT_OPEN_IN_STATE_ON_NODE, node, values))

    async def escalated_on_node(self, node: str, *, limit: int = 100) -> list[Incident]:
        """Escalated incidents on a node, most recently closed first (locked)."""
        return _incidents(await self._conn.fetch(SELECT_ESCALATED_ON_NODE, node, limit))

    async def held_gpus(self, node: str, *, other_than: str) -> set[str]:
        """GPUs of a node that other incidents keep out of service."""
        rows = await self._conn.fetch(SELECT_HELD_GPUS_ON_NODE, node, other_than)
        return {r["gpu_uuid"] for r in rows}

    async def others_holding_gpu(self, gpu_uuid: str, *, other_than: str, since: datetime) -> list[str]:
        """Ids of other incidents that keep this GPU out of service: still open, or escalated (a person
        must act) at or after ``since``; an escalation older than that was followed by a return already."""
        rows = await self._conn.fetch(SELECT_HOLDING_GPU, gpu_uuid, other_than, since)
        return [r["incident_id"] for r in rows]

    async def migrating_for(self, workload_id: str) -> list[Incident]:
        """Incidents migrating this workload now (locked)."""
        return _incidents(await self._conn.fetch(SELECT_MIGRATING_FOR_WORKLOAD, workload_id))

    async def due_deadline(self, *, detected_before: datetime, limit: int = 200) -> list[Incident]:
        """Open incidents detected before the cut-off, locked, skipping those another replica holds."""
        return _incidents(await self._conn.fetch(SELECT_DUE_DEADLINE, detected_before, limit))

    async def due_settle(self, *, now: datetime, limit: int = 200) -> list[Incident]:
        """Verifying incidents whose settle period is over (locked, skip locked)."""
        return _incidents(await self._conn.fetch(SELECT_DUE_SETTLE, now, limit))

    async def search(self, flt: IncidentFilter, *, limit: int, offset: int) -> list[Incident]:
        """Incidents matching the filter, newest first."""
        rows = await self._conn.fetch(
            SELECT_LIST, flt.state, flt.node, flt.gpu, flt.fault_type, flt.tenant, limit, offset
        )
        return _incidents(rows)

    async def for_slo(self, *, since: datetime, fault_type: str | None, tenant: str | None) -> list[Incident]:
        """Incidents whose fault happened since ``since``."""
        return _incidents(await self._conn.fetch(SELECT_FOR_SLO, since, fault_type, tenant))


def _placement(row: asyncpg.Record) -> Placement:
    return Placement(
        workload_id=row["workload_id"],
        tenant_id=row["tenant_id"],
        placement_id=row["placement_id"],
        node=row["node"],
        gpus=tuple(row["gpus"]),
    )


class PlacementStore:
    """The placement map (from scheduler events) and GPU health (from inventory events)."""

    def __init__(self, conn: Conn) -> None:
        self._conn = conn

    async def place(self, p: Placement, *, priority: float) -> None:
        """Record where a workload runs now (a new placement replaces the old one)."""
        await self._conn.execute(
            UPSERT_PLACEMENT, p.workload_id, p.tenant_id, p.placement_id, p.node, list(p.gpus), priority
        )

    async def end(self, *, workload_id: str, placement_id: str) -> None:
        """Forget a placement that ended, unless the workload already has a newer one."""
        await self._conn.execute(DELETE_PLACEMENT, workload_id, placement_id)

    async def on_gpu(self, gpu: str) -> list[Placement]:
        """Workloads holding a GPU."""
        return [_placement(r) for r in await self._conn.fetch(SELECT_PLACEMENTS_ON_GPU, gpu)]

    async def on_node(self, node: str) -> list[Placement]:
        """Workloads placed on a node."""
        return [_placement(r) for r in await self._conn.fetch(SELECT_PLACEMENTS_ON_NODE, node)]

    async def of(self, workload_ids: Sequence[str]) -> dict[str, Placement]:
        """Current placements of the given workloads, by workload id."""
        rows = await self._conn.fetch(SELECT_PLACEMENTS, list(workload_ids))
        return {r["workload_id"]: _placement(r) for r in rows}

    async def set_health(self, *, gpu: str, node: str, health: str) -> None:
        """Record a GPU's health as inventory reported it."""
        await self._conn.execute(UPSERT_HEALTH, gpu, node, health)

    async def health_of(self, gpus: Sequence[str]) -> dict[str, str]:
        """Health of the given GPUs as inventory last reported it (GPUs never reported are left out)."""
        rows = await self._conn.fetch(SELECT_HEALTH, list(gpus))
        return {r["gpu_uuid"]: r["health"] for r in rows}

    async def out_of_service_on_node(self, node: str) -> list[str]:
        """GPUs of a node that inventory reports draining or failed."""
        return [r["gpu_uuid"] for r in await self._conn.fetch(SELECT_OUT_OF_SERVICE_ON_NODE, node)]
