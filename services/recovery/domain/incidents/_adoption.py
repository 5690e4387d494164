"""Workloads found on drained hardware: adopted by an open incident, or moved off by an escalated one."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import AwareDatetime

from services.recovery.domain.incidents._model import Incident, IncidentState, Transition, ignore, move
from services.recovery.domain.incidents._scope import (
    HOLDING_STATES,
    leaves_out_of_service,
    moves_away,
    requested_drain,
)
from services.recovery.domain.workload_moves import Migration


def adopt_workloads(incident: Incident, *, workload_ids: Sequence[str], at: AwareDatetime) -> Transition:
    """Workloads found on the GPU (or node) after detection join the incident and are moved too.

    A placement can land on the GPU between detection and the drain taking effect; without this it
    would stay on a drained GPU. While draining, they are simply added (the drain's completion moves
    them all); once migrating or verifying, each gets its migration now. An incident that restarts
    workloads in place adopts nothing: its GPU stays in service.
    """
    new = tuple(w for w in dict.fromkeys(workload_ids) if w not in incident.workload_ids)
    if not new or incident.state not in HOLDING_STATES or not requested_drain(incident):
        return ignore(incident)
    grown = incident.model_copy(update={"workload_ids": (*incident.workload_ids, *new)})
    if incident.state is IncidentState.DRAINING:
        return Transition(incident=grown)
    moves = moves_away(incident, new)
    migrations = (*incident.migrations, *(Migration(workload_id=w) for w in new))
    if incident.state is IncidentState.VERIFYING:
        reason = "workloads found on the drained GPU"
        return move(grown, IncidentState.MIGRATING, at=at, commands=moves, reason=reason,
                     migrations=migrations, recovered_at=None)  # fmt: skip
    return Transition(incident=grown.model_copy(update={"migrations": migrations}), commands=moves)


def move_strays(incident: Incident, *, workload_ids: Sequence[str]) -> Transition:
    """Workloads found on hardware an escalated incident left out of service are moved away.

    The scheduler may place a workload on a GPU just before it sees the drain, and recovery may learn
    of that placement only after the incident closed; without this the workload would stay on the
    drained GPU for good. The incident stays closed (its state and history are final); it lists the
    workloads and asks for their moves. workload_ids are workloads nobody has asked to move yet.
    """
    new = tuple(dict.fromkeys(workload_ids))
    if not new or not leaves_out_of_service(incident):
        return ignore(incident)
    listed = tuple(dict.fromkeys((*incident.workload_ids, *new)))
    return Transition(
        incident=incident.model_copy(update={"workload_ids": listed}), commands=moves_away(incident, new)
    )


def still_moving(incident: Incident, workload_id: str) -> bool:
    """Whether an open incident is moving the workload (or will, once its drain holds) and it runs not yet.

    Another incident on the same hardware (a multi-GPU workload, a node drain beside a GPU drain) then
    leaves the workload to it: asked twice, the scheduler would move it twice.
    """
    if not incident.is_open or workload_id not in incident.workload_ids:
        return False
    migration = next((m for m in incident.migrations if m.workload_id == workload_id), None)
    return migration is None or not migration.done
