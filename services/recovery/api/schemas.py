"""Response models of the recovery API, built from the domain objects."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from pydantic import BaseModel, Field

from services.recovery.domain.catalog import FaultEntry
from services.recovery.domain.correlate import Finding
from services.recovery.domain.host_actions import HostActionResult
from services.recovery.domain.incidents import Incident, StateChange
from services.recovery.domain.slo import SloStats
from services.recovery.domain.workload_moves import Migration

__all__ = [
    "CatalogOut",
    "DiagnosisOut",
    "IncidentDetail",
    "IncidentSummary",
    "SloOut",
    "detail",
    "summary",
]


class IncidentSummary(BaseModel):
    """One incident in a list."""

    incident_id: str
    state: str
    fault_type: str
    severity: str
    owner: str
    action: str
    recoverable: bool
    gpu: str | None
    node: str
    count: int = Field(description="Signals folded into the incident.")
    fault_at: datetime
    detected_at: datetime
    recovered_at: datetime | None
    closed_at: datetime | None
    escalation_reason: str | None
    repeat_of: str | None
    progress_percent: int | None = Field(
        description="Mean migration progress over the shown workloads (null: no migration)."
    )


class DiagnosisOut(BaseModel):
    """Probable cause, with every finding and the evidence behind it."""

    probable_cause: str
    confidence: float
    findings: list[Finding]


class IncidentDetail(IncidentSummary):
    """An incident with its diagnosis, history, migration progress per workload and the hosts' actions."""

    diagnosis: DiagnosisOut | None
    history: list[StateChange]
    migrations: list[Migration]
    actions: list[HostActionResult] = Field(
        default_factory=list,
        description="The resets and reboots the hosts reported, with their commands and output (admins only)",
    )


class SloOut(BaseModel):
    """SLO figures for a period, overall and per fault class: detection to the host running the workloads
    again, over the incidents that affected a workload (see services/recovery/domain/slo.py)."""

    since: datetime = Field(description="Start of the window: incidents whose fault happened since")
    as_of: datetime = Field(description="End of the window: an incident still recovering is judged then")
    period: str = Field(description="The window's length as asked, e.g. 24h")
    fault_type: str | None = Field(description="The fault class asked for; None for all")
    overall: SloStats
    by_fault_type: dict[str, SloStats] = Field(description="Per fault class (the catalog's fault type key)")


class CatalogOut(BaseModel):
    """The fault catalog."""

    sources: dict[str, str]
    faults: list[FaultEntry]


def _shown(
    incident: Incident, *, workload_tenants: Mapping[str, str | None], tenant: str | None
) -> list[Migration]:
    """The migrations a caller may see: all for the admin, a tenant's own workloads' for a tenant."""
    return [m for m in incident.migrations if tenant is None or workload_tenants.get(m.workload_id) == tenant]


def _progress(migrations: list[Migration]) -> int | None:
    return round(sum(m.percent for m in migrations) / len(migrations)) if migrations else None


def summary(
    incident: Incident, *, workload_tenants: Mapping[str, str | None] | None = None, tenant: str | None = None
) -> IncidentSummary:
    """The list view of an incident; progress over the migrations the caller may see (see detail)."""
    shown = _shown(incident, workload_tenants=workload_tenants or {}, tenant=tenant)
    c = incident.classification
    return IncidentSummary(
        incident_id=incident.id,
        state=incident.state.value,
        fault_type=c.fault_type,
        severity=c.severity.value,
        owner=c.owner.value,
        action=c.action.value,
        recoverable=c.recoverable,
        gpu=incident.gpu,
        node=incident.node,
        count=incident.count,
        fault_at=incident.fault_at,
        detected_at=incident.detected_at,
        recovered_at=incident.recovered_at,
        closed_at=incident.closed_at,
        escalation_reason=incident.escalation_reason,
        repeat_of=incident.repeat_of,
        progress_percent=_progress(shown),
    )


def detail(
    incident: Incident, *, workload_tenants: Mapping[str, str | None], tenant: str | None
) -> IncidentDetail:
    """The full view; a tenant sees only its own workloads' migrations, and not the hosts' actions."""
    migrations = _shown(incident, workload_tenants=workload_tenants, tenant=tenant)
    d = incident.diagnosis
    diagnosis = (
        DiagnosisOut(
            probable_cause=d.probable_cause.value, confidence=d.confidence, findings=list(d.findings)
        )
        if d is not None
        else None
    )
    return IncidentDetail(
        **summary(incident, workload_tenants=workload_tenants, tenant=tenant).model_dump(),
        diagnosis=diagnosis,
        history=list(incident.history),
        migrations=migrations,
        actions=list(incident.actions) if tenant is None else [],
    )
