"""Carrying out a transition: store the incident, and emit its progress and commands through the outbox."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from libs.common.events import Event
from libs.common.events.agent import HostActionRequestedV1
from libs.common.events.recovery import (
    DrainRequestedV1,
    IncidentClosedV1,
    IncidentOpenedV1,
    IncidentProgressedV1,
    MigrationRequestedV1,
    ReturnToServiceRequestedV1,
)
from services.recovery.domain.commands import (
    Command,
    DrainGpu,
    DrainNode,
    MigrateWorkload,
    RebootNode,
    ResetGpu,
    RestartWorkload,
    ReturnGpuToService,
    ReturnNodeToService,
)
from services.recovery.domain.host_actions import HostAction, command_id
from services.recovery.domain.incidents import Incident, IncidentState, Transition
from services.recovery.domain.placements import Placement
from services.recovery.domain.slo import time_to_detect, time_to_recover
from services.recovery.domain.workload_moves import Migration
from services.recovery.service import metrics
from services.recovery.service.unit_of_work import RecoveryUnitOfWork

__all__ = ["Effects", "apply"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Effects:
    """What carrying out a transition needs besides the transaction."""

    settle: timedelta
    now: datetime


async def apply(
    uow: RecoveryUnitOfWork,
    transition: Transition,
    *,
    before: Incident | None,
    fx: Effects,
    progress: Migration | None = None,
) -> None:
    """Persist the incident and emit, in order: opened, progress, state changes, commands, closed."""
    if transition.ignored:
        return
    incident = transition.incident
    placements = await uow.placements.of(incident.workload_ids)
    settle = fx.now + fx.settle if _resets(transition.commands) else None
    tenants = {w: p.tenant_id for w, p in placements.items()}
    await uow.incidents.save(incident, tenants=tenants, settle_until=settle)
    if before is None:
        await _opened(uow, incident)
    if progress is not None:
        await uow.emit(_progress(incident, progress), tenant=tenants.get(progress.workload_id))
    for change in incident.history[len(before.history) if before else 0 :]:
        detail = change.reason or _STATE_DETAIL.get(change.state, "")
        await uow.emit(IncidentProgressedV1(incident_id=incident.id, state=change.state.value, detail=detail))
    for command in transition.commands:
        for event, tenant in await _events_for(uow, incident, command, placements):
            await uow.emit(event, tenant=tenant)
    if not incident.is_open and (before is None or before.is_open):
        await uow.emit(_closed(incident))


_STATE_DETAIL = {
    IncidentState.DIAGNOSING: "correlating the telemetry window",
    IncidentState.DRAINING: "drain requested",
    IncidentState.MIGRATING: "moving the affected workloads",
    IncidentState.VERIFYING: "health check after reset or reboot",
}


def _resets(commands: Sequence[Command]) -> bool:
    return any(isinstance(c, ResetGpu | RebootNode) for c in commands)


async def _opened(uow: RecoveryUnitOfWork, incident: Incident) -> None:
    c = incident.classification
    await uow.emit(
        IncidentOpenedV1(
            incident_id=incident.id,
            fault_type=c.fault_type,
            gpu_uuid=incident.gpu,
            node=incident.node,
            severity=c.severity.value,
        )
    )
    metrics.INCIDENTS_OPENED.labels(c.fault_type).inc()
    metrics.TIME_TO_DETECT.labels(c.fault_type).observe(time_to_detect(incident).total_seconds())


def _progress(incident: Incident, migration: Migration) -> IncidentProgressedV1:
    return IncidentProgressedV1(
        incident_id=incident.id,
        state=IncidentState.MIGRATING.value,
        workload_id=migration.workload_id,
        phase=migration.phase.value,
        percent=migration.percent,
        detail=f"{migration.workload_id}: {migration.phase.value} {migration.percent}%"
        + (f" ({migration.note})" if migration.note else ""),
    )


def _closed(incident: Incident) -> IncidentClosedV1:
    recovered = incident.state is IncidentState.RESOLVED
    ttr = time_to_recover(incident)
    outcome: Literal["recovered", "escalated"] = "recovered" if recovered else "escalated"
    metrics.INCIDENTS_CLOSED.labels(incident.fault_type, outcome).inc()
    if ttr is not None:
        metrics.TIME_TO_RECOVER.labels(incident.fault_type).observe(ttr.total_seconds())
    return IncidentClosedV1(
        incident_id=incident.id,
        outcome=outcome,
        seconds_to_recover=ttr.total_seconds() if ttr is not None else None,
        reason=incident.escalation_reason or (incident.history[-1].reason if incident.history else ""),
    )


async def _events_for(
    uow: RecoveryUnitOfWork, incident: Incident, command: Command, placements: dict[str, Placement]
) -> list[tuple[Event, str | None]]:
    """The events that ask other services to carry out one command."""
    iid, recoverable = incident.id, incident.classification.recoverable
    target: Literal["draining", "failed"] = "draining" if recoverable else "failed"
    match command:
        case DrainGpu(gpu=gpu, reason=reason):
            drain = DrainRequestedV1(
                incident_id=iid, gpu_uuid=gpu, node=incident.node, reason=reason, target=target
            )
            return [(drain, None)]
        case DrainNode(node=node, reason=reason):
            return [(DrainRequestedV1(incident_id=iid, node=node, reason=reason, target=target), None)]
        case MigrateWorkload(workload_id=w, away_from_gpu=away):
            return _migration(iid, placements.get(w), w, away or incident.gpu, reason="drained")
        case RestartWorkload(workload_id=w):
            return _migration(iid, placements.get(w), w, incident.gpu, reason="restart after workload fault")
        case ReturnGpuToService(gpu=gpu):
            others = await uow.incidents.others_holding_gpu(gpu, other_than=iid, since=incident.detected_at)
            if others:
                # Another fault of this GPU is still handled, or escalated to a person meanwhile: the
                # last incident to recover returns it, and an escalation keeps it out.
                log.info("incident %s leaves GPU %s out of service: incidents %s hold it", iid, gpu, others)
                return []
            return [(ReturnToServiceRequestedV1(incident_id=iid, gpu_uuid=gpu, node=incident.node), None)]
        case ReturnNodeToService(node=node):
            gpus = await _node_gpus_to_return(uow, incident)
            return [(ReturnToServiceRequestedV1(incident_id=iid, gpu_uuid=g, node=node), None) for g in gpus]
        case ResetGpu(gpu=gpu):
            # The agent of the node resets it; the settle period (saved above) starts now, and only
            # readings it takes after this count for the health check.
            return [(_host_action(incident, gpu=gpu, action="reset_gpu"), None)]
        case RebootNode():
            return [(_host_action(incident, gpu=None, action="reboot_node"), None)]
        case _:
            # Escalate closes the incident.
            return []


def _host_action(incident: Incident, *, gpu: str | None, action: HostAction) -> HostActionRequestedV1:
    # Sent with the transition into verifying: its history's length names the step (see asked_action).
    return HostActionRequestedV1(
        command_id=command_id(incident_id=incident.id, action=action, step=len(incident.history)),
        incident_id=incident.id,
        node=incident.node,
        gpu_uuid=gpu,
        action=action,
    )


def _migration(
    incident_id: str, placement: Placement | None, workload_id: str, away: str | None, *, reason: str
) -> list[tuple[Event, str | None]]:
    if placement is None:
        return []  # the workload ended meanwhile: nothing left to move
    away_from = away or (placement.gpus[0] if placement.gpus else "")
    event = MigrationRequestedV1(
        incident_id=incident_id,
        workload_id=workload_id,
        tenant_id=placement.tenant_id,
        away_from_gpu=away_from,
        reason=reason,
    )
    return [(event, placement.tenant_id)]


async def _node_gpus_to_return(uow: RecoveryUnitOfWork, incident: Incident) -> list[str]:
    """The node's drained GPUs, except those another incident still holds out of service."""
    places, incidents = uow.placements, uow.incidents
    drained = set(await places.out_of_service_on_node(incident.node))
    if incident.gpu is not None:
        drained.add(incident.gpu)
    held = await incidents.held_gpus(incident.node, other_than=incident.id)
    return sorted(drained - held)
