"""Recovery's requests (drain, migrate) and incident progress, keyed by incident."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from libs.common.events import topics
from libs.common.events.base import Event

TOPIC = topics.RECOVERY


class _IncidentEvent(Event):
    incident_id: str = Field(description="Incident id.")

    def subject(self) -> str:
        return self.incident_id


class IncidentOpenedV1(_IncidentEvent):
    """A fault opened an incident."""

    type: Literal["recovery.incident.opened.v1"] = "recovery.incident.opened.v1"
    fault_type: str = Field(description="Catalog key, e.g. xid-79.")
    gpu_uuid: str | None = Field(default=None, description="GPU affected.")
    node: str = Field(description="Node affected.")
    severity: str = Field(description="Severity from the catalog.")


class DrainRequestedV1(_IncidentEvent):
    """Recovery asks inventory to take a GPU (or a whole node) out of service."""

    type: Literal["recovery.drain.requested.v1"] = "recovery.drain.requested.v1"
    gpu_uuid: str | None = Field(default=None, description="GPU to drain; None drains the node.")
    node: str = Field(description="Node.")
    reason: str = Field(description="Why.")
    target: Literal["draining", "failed"] = Field(default="draining", description="Health to set.")


class ReturnToServiceRequestedV1(_IncidentEvent):
    """Recovery asks inventory to mark a GPU healthy again after a passing health check."""

    type: Literal["recovery.return.requested.v1"] = "recovery.return.requested.v1"
    gpu_uuid: str = Field(description="GPU.")
    node: str = Field(description="Node.")


class MigrationRequestedV1(_IncidentEvent):
    """Recovery asks the scheduler to re-place a workload away from a failed GPU, priority kept."""

    type: Literal["recovery.migration.requested.v1"] = "recovery.migration.requested.v1"
    workload_id: str = Field(description="Workload to move.")
    tenant_id: str = Field(description="Its tenant.")
    away_from_gpu: str = Field(description="GPU to avoid.")
    reason: str = Field(
        default="", description="Why: drained GPU or node, or restart after a workload fault."
    )


class IncidentProgressedV1(_IncidentEvent):
    """An incident moved to a new state, with migration progress when one is under way."""

    type: Literal["recovery.incident.progressed.v1"] = "recovery.incident.progressed.v1"
    state: str = Field(description="New state.")
    workload_id: str | None = Field(default=None, description="Workload being migrated.")
    phase: str | None = Field(default=None, description="checkpoint, transfer, restore or running.")
    percent: int | None = Field(default=None, description="Migration progress, %.")
    detail: str = Field(default="", description="What happened.")


class IncidentClosedV1(_IncidentEvent):
    """An incident ended: recovered, or escalated to people."""

    type: Literal["recovery.incident.closed.v1"] = "recovery.incident.closed.v1"
    outcome: Literal["recovered", "escalated"] = Field(description="How it ended.")
    seconds_to_recover: float | None = Field(default=None, description="Detection to recovery.")
    reason: str = Field(default="", description="Detail.")


EVENTS: tuple[type[Event], ...] = (
    IncidentOpenedV1,
    DrainRequestedV1,
    ReturnToServiceRequestedV1,
    MigrationRequestedV1,
    IncidentProgressedV1,
    IncidentClosedV1,
)
