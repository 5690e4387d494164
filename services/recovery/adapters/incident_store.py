"""Postgres access to incidents for the use cases: saving, and the locked reads of transitions. No commits."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

import asyncpg

from services.recovery.adapters._pg import Conn
from services.recovery.domain.incidents import Incident, IncidentState

__all__ = ["IncidentStore"]

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
# Held to the end of the transaction: signals of one node are handled one at a time.
LOCK_NODE = "SELECT pg_advisory_xact_lock(hashtextextended('recovery.node:' || $1, 0))"
INSERT_INCIDENT_WORKLOAD = """
INSERT INTO incident_workloads (incident_id, workload_id, tenant_id) VALUES ($1, $2, $3)
ON CONFLICT DO NOTHING
"""
SELECT_INCIDENT = "SELECT doc FROM incidents WHERE incident_id = $1 FOR UPDATE"
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


def incidents_of(rows: Sequence[asyncpg.Record]) -> list[Incident]:
    """Incidents from rows holding their JSONB document."""
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

    async def lock_node(self, node: str) -> None:
        """Wait for, then hold until commit, the node's lock: a signal sees what the previous one opened."""
        await self._conn.execute(LOCK_NODE, node)

    async def get(self, incident_id: str) -> Incident | None:
        """One incident by id (locked), or None when there is none."""
        found = incidents_of(await self._conn.fetch(SELECT_INCIDENT, incident_id))
        return found[0] if found else None

    async def recent_on_node(self, node: str, *, since: datetime) -> list[Incident]:
        """Open incidents on the node and those seen since ``since``, newest first (locked)."""
        return incidents_of(await self._conn.fetch(SELECT_RECENT_ON_NODE, node, since))

    async def open_in_state(self, node: str, *states: IncidentState) -> list[Incident]:
        """Open incidents on a node in any of the given states, oldest first (locked)."""
        values = [state.value for state in states]
        return incidents_of(await self._conn.fetch(SELECT_OPEN_IN_STATE_ON_NODE, node, values))

    async def escalated_on_node(self, node: str, *, limit: int = 100) -> list[Incident]:
        """Escalated incidents on a node, most recently closed first (locked)."""
        return incidents_of(await self._conn.fetch(SELECT_ESCALATED_ON_NODE, node, limit))

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
        return incidents_of(await self._conn.fetch(SELECT_MIGRATING_FOR_WORKLOAD, workload_id))

    async def due_deadline(self, *, detected_before: datetime, limit: int = 200) -> list[Incident]:
        """Open incidents detected before the cut-off, locked, skipping those another replica holds."""
        return incidents_of(await self._conn.fetch(SELECT_DUE_DEADLINE, detected_before, limit))

    async def due_settle(self, *, now: datetime, limit: int = 200) -> list[Incident]:
        """Verifying incidents whose settle period is over (locked, skip locked)."""
        return incidents_of(await self._conn.fetch(SELECT_DUE_SETTLE, now, limit))
