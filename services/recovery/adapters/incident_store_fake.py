"""Incidents in memory, for unit tests (held to IncidentStore by tests/integration/recovery/
test_incident_store_contract.py)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from services.recovery.domain.incidents import Incident, IncidentState

__all__ = ["FakeIncidentStore"]

_RECENT_LIMIT = 200


class FakeIncidentStore:
    """Incidents by id, with the tenants, workloads and settle instant the SQL store keeps beside them."""

    def __init__(self) -> None:
        self.incidents: dict[str, Incident] = {}
        self.tenants: dict[str, set[str]] = {}
        self.workloads: dict[str, set[str]] = {}
        self.settle_until: dict[str, datetime | None] = {}

    async def save(
        self, incident: Incident, *, tenants: Mapping[str, str], settle_until: datetime | None = None
    ) -> None:
        """Insert or update an incident; tenants maps its workloads to their tenants."""
        i = incident
        self.incidents[i.id] = i
        self.tenants[i.id] = self.tenants.get(i.id, set()) | set(tenants.values())
        self.workloads[i.id] = self.workloads.get(i.id, set()) | set(i.workload_ids)
        kept = settle_until if settle_until is not None else self.settle_until.get(i.id)
        self.settle_until[i.id] = kept if i.state is IncidentState.VERIFYING else None

    async def lock_node(self, node: str) -> None:
        """Nothing to wait for: one test task at a time."""

    async def get(self, incident_id: str) -> Incident | None:
        """One incident by id, or None when there is none."""
        return self.incidents.get(incident_id)

    async def recent_on_node(self, node: str, *, since: datetime) -> list[Incident]:
        """Open incidents on the node and those seen since ``since``, newest first."""
        found = [
            i
            for i in self.incidents.values()
            if i.node == node and (i.closed_at is None or i.last_seen >= since)
        ]
        return sorted(found, key=lambda i: i.last_seen, reverse=True)[:_RECENT_LIMIT]

    async def open_in_state(self, node: str, *states: IncidentState) -> list[Incident]:
        """Open incidents on a node in any of the given states, oldest first."""
        found = [i for i in self.incidents.values() if i.node == node and i.state in states and i.is_open]
        return sorted(found, key=lambda i: (i.detected_at, i.id))

    async def escalated_on_node(self, node: str, *, limit: int = 100) -> list[Incident]:
        """Escalated incidents on a node, most recently closed first."""
        found = [i for i in self.incidents.values() if i.node == node and i.state is IncidentState.ESCALATED]
        return sorted(found, key=lambda i: i.closed_at or i.detected_at, reverse=True)[:limit]

    async def held_gpus(self, node: str, *, other_than: str) -> set[str]:
        """GPUs of a node that other incidents keep out of service."""
        return {
            i.gpu
            for i in self.incidents.values()
            if i.node == node and i.id != other_than and i.gpu is not None and _holds(i, since=None)
        }

    async def others_holding_gpu(self, gpu_uuid: str, *, other_than: str, since: datetime) -> list[str]:
        """Ids of other incidents that keep this GPU out of service (see IncidentStore)."""
        return sorted(
            i.id
            for i in self.incidents.values()
            if i.gpu == gpu_uuid and i.id != other_than and _holds(i, since=since)
        )

    async def migrating_for(self, workload_id: str) -> list[Incident]:
        """Incidents migrating this workload now."""
        return [
            i
            for i in self.incidents.values()
            if workload_id in self.workloads.get(i.id, set()) and i.state is IncidentState.MIGRATING
        ]

    async def due_deadline(self, *, detected_before: datetime, limit: int = 200) -> list[Incident]:
        """Open incidents detected before the cut-off, oldest first."""
        found = [
            i for i in self.incidents.values() if i.closed_at is None and i.detected_at <= detected_before
        ]
        return sorted(found, key=lambda i: i.detected_at)[:limit]

    async def due_settle(self, *, now: datetime, limit: int = 200) -> list[Incident]:
        """Verifying incidents whose settle period is over."""
        due = [
            (settle, i)
            for i in self.incidents.values()
            if i.state is IncidentState.VERIFYING
            and (settle := self.settle_until.get(i.id)) is not None
            and settle <= now
        ]
        return [i for _, i in sorted(due, key=lambda pair: pair[0])][:limit]


def _holds(incident: Incident, *, since: datetime | None) -> bool:
    """Open, or escalated (at or after ``since``, when given)."""
    if incident.closed_at is None:
        return True
    escalated = incident.state is IncidentState.ESCALATED
    return escalated and (since is None or incident.closed_at >= since)
