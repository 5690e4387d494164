"""Drain scope: whether an incident drains one GPU or its whole node, and what that holds out of service."""

from __future__ import annotations

from collections.abc import Sequence

from services.recovery.domain.catalog import Action
from services.recovery.domain.commands import Command, DrainGpu, DrainNode, MigrateWorkload
from services.recovery.domain.correlate import Cause
from services.recovery.domain.incidents._model import Incident, IncidentState

# Two or more failing peers (see correlate._node): one other failure on the node may be coincidence.
WIDEN_MIN_CONFIDENCE = 0.8


def node_wide(incident: Incident) -> bool:
    """A node fault, a node-reboot action, or a confident diagnosis blaming the node or its interconnect."""
    d = incident.diagnosis
    blames_node = (
        d is not None
        and d.probable_cause is Cause.NODE_OR_INTERCONNECT
        and d.confidence >= WIDEN_MIN_CONFIDENCE
    )
    return incident.gpu is None or incident.classification.action is Action.REBOOT_NODE or blames_node


def drains_node(incident: Incident) -> bool:
    """Whether recovery drains (or drained) the incident's whole node rather than one GPU."""
    return isinstance(drain_command(incident), DrainNode)


def drain_command(incident: Incident) -> Command:
    reason = f"{incident.id} {incident.fault_type}"
    if node_wide(incident) or incident.gpu is None:
        return DrainNode(node=incident.node, reason=reason)
    return DrainGpu(gpu=incident.gpu, reason=reason)


#: GPU health values inventory reports for hardware out of service.
OUT_OF_SERVICE = frozenset({"draining", "failed"})
#: Open states in which an incident holds its GPU (or node) drained and takes in workloads found there.
HOLDING_STATES = frozenset({IncidentState.DRAINING, IncidentState.MIGRATING, IncidentState.VERIFYING})


def drain_in_effect(incident: Incident, *, gpu_health: str | None) -> bool:
    """Whether a draining incident's GPU drain already holds, so no health change will confirm it.

    Inventory changes nothing (and so says nothing) when asked to drain a GPU that is already draining or
    failed, or to fail one that is already failed; such an incident would wait for its deadline.
    gpu_health is the GPU's health as last reported by inventory (None: never reported).
    """
    if incident.state is not IncidentState.DRAINING or drains_node(incident):
        return False
    if incident.classification.recoverable:
        return gpu_health in OUT_OF_SERVICE
    return gpu_health == "failed"


def requested_drain(incident: Incident) -> bool:
    """Whether the incident asked for its GPU or node to be drained (restarts and escalations do not)."""
    return any(change.state is IncidentState.DRAINING for change in incident.history)


def leaves_out_of_service(incident: Incident) -> bool:
    """An escalated incident that drained its GPU or node: the hardware stays out until a person acts."""
    return incident.state is IncidentState.ESCALATED and requested_drain(incident)


def moves_away(incident: Incident, workload_ids: Sequence[str]) -> tuple[Command, ...]:
    away = None if isinstance(drain_command(incident), DrainNode) else incident.gpu
    return tuple(MigrateWorkload(workload_id=w, away_from_gpu=away) for w in workload_ids)
