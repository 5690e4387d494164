"""An in-memory twin of SlaStore for unit tests: policies, incidents, moves and credit decisions."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from services.billing.domain.sla import CreditDecision, Incident, SlaPolicy, WorkloadMove

__all__ = ["FakeSlaStore"]


class FakeSlaStore:
    """Policies (``policies``), incidents, moves and decisions (``decisions``), as SlaStore answers them."""

    def __init__(self) -> None:
        self.policies: dict[str, SlaPolicy] = {}
        self.incidents: dict[str, Incident] = {}
        self.moves: dict[str, WorkloadMove] = {}  # by event id
        self.decisions: dict[tuple[str, str], CreditDecision] = {}

    async def policy(self, tenant_id: str) -> SlaPolicy | None:
        """The tenant's own policy; None when it has the default."""
        return self.policies.get(tenant_id)

    async def put_policy(self, tenant_id: str, policy: SlaPolicy) -> None:
        """Set (or replace) the tenant's policy."""
        self.policies[tenant_id] = policy

    async def record_incident(self, incident: Incident) -> None:
        """Keep an incident once."""
        self.incidents.setdefault(incident.incident_id, incident)

    async def close_incident(self, incident_id: str, *, outcome: str, at: datetime, event_id: str) -> None:
        """Record how and when a known incident ended (the first close wins)."""
        known = self.incidents.get(incident_id)
        if known is not None and known.closed_at is None:
            self.incidents[incident_id] = replace(
                known, outcome=outcome, closed_at=at, closed_event_id=event_id
            )

    async def incident(self, incident_id: str) -> Incident | None:
        """An incident billing learned, if it did."""
        return self.incidents.get(incident_id)

    async def record_move(self, move: WorkloadMove) -> None:
        """Keep a move once."""
        self.moves.setdefault(move.event_id, move)

    async def moves_for_incident(self, incident_id: str) -> list[WorkloadMove]:
        """The moves an incident caused, oldest first."""
        return sorted(
            (m for m in self.moves.values() if m.incident_id == incident_id), key=lambda m: (m.at, m.event_id)
        )

    async def moves_into(self, placement_id: str) -> list[WorkloadMove]:
        """The incident moves whose new placement is `placement_id`."""
        into = [m for m in self.moves.values() if m.to_placement_id == placement_id]
        # an empty incident name counts too, as SQL's IS NOT NULL; only a rebalancing move has none
        return sorted((m for m in into if m.incident_id is not None), key=lambda m: (m.at, m.event_id))

    async def decision(self, incident_id: str, workload_id: str) -> CreditDecision | None:
        """The credit decision of one (incident, workload), if made."""
        return self.decisions.get((incident_id, workload_id))

    async def credited_between(self, tenant_id: str, *, start: datetime, end: datetime) -> int:
        """Micro-units credited to a tenant for recoveries in [start, end)."""
        return sum(
            d.amount_micro
            for d in self.decisions.values()
            if d.tenant_id == tenant_id and start <= d.running_at < end
        )

    async def record_decision(self, decision: CreditDecision) -> bool:
        """Keep a decision once; False when that (incident, workload) was decided before."""
        key = (decision.incident_id, decision.workload_id)
        if key in self.decisions:
            return False
        self.decisions[key] = decision
        return True
