"""Read-side queries of the incident API: one incident, the list, and the SLO input. Never writes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from services.recovery.adapters._pg import Conn
from services.recovery.adapters.incident_store import incidents_of
from services.recovery.domain.incidents import Incident

__all__ = ["IncidentFilter", "IncidentQueries"]

SELECT_INCIDENT = "SELECT doc FROM incidents WHERE incident_id = $1"
SELECT_INCIDENT_TENANTS = "SELECT tenants FROM incidents WHERE incident_id = $1"
SELECT_WORKLOAD_TENANTS = "SELECT workload_id, tenant_id FROM incident_workloads WHERE incident_id = $1"
SELECT_WORKLOAD_TENANTS_OF = """
SELECT incident_id, workload_id, tenant_id FROM incident_workloads WHERE incident_id = ANY ($1::text[])
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


@dataclass(frozen=True, slots=True)
class IncidentFilter:
    """Filters of the incident list; None means any."""

    state: str | None = None
    node: str | None = None
    gpu: str | None = None
    fault_type: str | None = None
    tenant: str | None = None


class IncidentQueries:
    """What the API reads of incidents (the documents stored by ``IncidentStore``)."""

    def __init__(self, conn: Conn) -> None:
        self._conn = conn

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

    async def workload_tenants_of(self, incident_ids: list[str]) -> dict[str, dict[str, str | None]]:
        """The tenant of each workload, per incident, for several incidents at once."""
        found: dict[str, dict[str, str | None]] = {i: {} for i in incident_ids}
        for r in await self._conn.fetch(SELECT_WORKLOAD_TENANTS_OF, incident_ids):
            found[r["incident_id"]][r["workload_id"]] = r["tenant_id"]
        return found

    async def search(self, flt: IncidentFilter, *, limit: int, offset: int) -> list[Incident]:
        """Incidents matching the filter, newest first."""
        rows = await self._conn.fetch(
            SELECT_LIST, flt.state, flt.node, flt.gpu, flt.fault_type, flt.tenant, limit, offset
        )
        return incidents_of(rows)

    async def for_slo(self, *, since: datetime, fault_type: str | None, tenant: str | None) -> list[Incident]:
        """Incidents whose fault happened since ``since``."""
        return incidents_of(await self._conn.fetch(SELECT_FOR_SLO, since, fault_type, tenant))
