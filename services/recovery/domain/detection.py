"""Detection: a classified fault signal opens an incident, folds into one, or is ignored."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from pydantic import AwareDatetime, BaseModel, ConfigDict

from services.recovery.domain.catalog import Action
from services.recovery.domain.classify import Classification, FaultKind, FaultSignal
from services.recovery.domain.incidents import (
    Incident,
    IncidentState,
    RecoveryPolicy,
    StateChange,
    drains_node,
    leaves_out_of_service,
    verifying_since,
)

__all__ = [
    "Detection",
    "DetectionOutcome",
    "fails_health_check",
    "find_fold_target",
    "fold",
    "ingest_signal",
    "open_incident",
]


class DetectionOutcome(StrEnum):
    """What a signal did to the incident set."""

    OPENED = "opened"
    FOLDED = "folded"
    IGNORED = "ignored"


class Detection(BaseModel):
    """The outcome of one signal, and the incident it opened or folded into (None when ignored)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    outcome: DetectionOutcome
    incident: Incident | None = None


def _same_place(incident: Incident, signal: FaultSignal) -> bool:
    # Node-wide faults (no GPU) fold per node; GPU faults per GPU.
    if signal.gpu is None:
        return incident.gpu is None and incident.node == signal.node
    return incident.gpu == signal.gpu


def find_fold_target(
    incidents: Sequence[Incident], *, signal: FaultSignal, folds_as: str, policy: RecoveryPolicy
) -> Incident | None:
    """The incident a repeat folds into: same fault, same GPU, open or seen within the fold window.

    "Same fault" is the classification's fold key: the fault type, or a group of fault types that are
    one fault seen through several signals (XID 79 and NVML's GPU-lost reading).
    """
    for incident in incidents:
        if incident.classification.folds_as != folds_as or not _same_place(incident, signal):
            continue
        if incident.is_open or abs(signal.at - incident.last_seen) <= policy.fold_window:
            return incident
    return None


def _before_recovery(incident: Incident, signal: FaultSignal) -> bool:
    """Whether the signal reports a fault from before the incident's reset (or restart): a late report.

    A GPU-lost alert that trails its XID 79, delivered after the incident resolved, is the same fault;
    only a fault that happens after the reset is a repeat.
    """
    verifying = [c.at for c in incident.history if c.state is IncidentState.VERIFYING]
    cutoff = verifying[0] if verifying else incident.recovered_at or incident.closed_at
    return cutoff is not None and signal.at < cutoff


def _folds_into_closed(incident: Incident, signal: FaultSignal, *, out_of_service: bool) -> bool:
    """Whether a signal folds into a closed incident rather than opening a new one.

    A late report of the fault (from before the reset, or before the escalation) folds. So does a repeat
    while the escalated incident still holds the GPU out of service for a person: nothing new can be done.
    A fault after a recovery, or after a person returned the GPU, is a new incident: folded into the
    closed one, no one would notice that the GPU in service is failing again.
    """
    if _before_recovery(incident, signal):
        return True
    if incident.state is IncidentState.RESOLVED:
        return False
    return not leaves_out_of_service(incident) or out_of_service


def fold(incident: Incident, *, at: AwareDatetime) -> Incident:
    """Count a repeat of the incident's fault; last_seen never moves backwards."""
    return incident.model_copy(update={"count": incident.count + 1, "last_seen": max(incident.last_seen, at)})


def open_incident(
    *,
    incident_id: str,
    signal: FaultSignal,
    classification: Classification,
    workload_ids: Sequence[str],
    detected_at: AwareDatetime,
) -> Incident:
    """A new incident in the detected state for a signal nothing folded."""
    return Incident(
        id=incident_id,
        classification=classification,
        gpu=signal.gpu,
        node=signal.node,
        fault_at=signal.at,
        detected_at=detected_at,
        last_seen=signal.at,
        workload_ids=tuple(workload_ids),
        history=(StateChange(state=IncidentState.DETECTED, at=detected_at),),
    )


def ingest_signal(
    *,
    signal: FaultSignal,
    classification: Classification,
    incidents: Sequence[Incident],
    workload_ids: Sequence[str],
    incident_id: str,
    detected_at: AwareDatetime,
    policy: RecoveryPolicy,
    out_of_service: bool = False,
) -> Detection:
    """Fold the signal into a matching incident, or open one unless the catalog says to ignore it.

    A repeat of a closed incident within the fold window opens a new incident marked as its repeat,
    which escalates once its workloads are safe, when the GPU was back in service (resolved, or
    returned by a person after an escalation); a late report of a fault from before the reset folds.

    incidents are the GPU's and node's recent incidents; incident_id is used only when one is opened.
    workload_ids are the workloads to move: the GPU's, or the whole node's when the action reboots the node.
    out_of_service: whether inventory last reported the signal's GPU draining or failed.
    """
    target = find_fold_target(incidents, signal=signal, folds_as=classification.folds_as, policy=policy)
    if target is not None and (
        target.is_open or _folds_into_closed(target, signal, out_of_service=out_of_service)
    ):
        return Detection(outcome=DetectionOutcome.FOLDED, incident=fold(target, at=signal.at))
    if classification.action is Action.IGNORE:
        return Detection(outcome=DetectionOutcome.IGNORED)
    incident = open_incident(
        incident_id=incident_id,
        signal=signal,
        classification=classification,
        workload_ids=workload_ids,
        detected_at=detected_at,
    )
    if target is not None:
        # A repeat soon after a recovery: recover the workloads again, then hand the GPU to a person.
        incident = incident.model_copy(update={"repeat_of": target.id})
    return Detection(outcome=DetectionOutcome.OPENED, incident=incident)


def fails_health_check(incident: Incident, signal: FaultSignal, *, readings_decide: bool) -> bool:
    """Whether a fault signal fails the health check of an incident verifying its reset or reboot.

    A fault on the GPU (or, for a node reboot, anywhere on the node) after the action fails it. A late
    report of a fault from before the action does not. Neither does the GPU still reported lost when
    readings decide (readings_decide): the reboot may not have finished, and the incident waits for a
    reading of the GPU answering until its deadline.
    """
    action_at = verifying_since(incident)
    if incident.state is not IncidentState.VERIFYING or action_at is None or signal.at < action_at:
        return False
    if not (signal.gpu is None or incident.gpu == signal.gpu or drains_node(incident)):
        return False
    return not (readings_decide and signal.kind is FaultKind.LOST)
