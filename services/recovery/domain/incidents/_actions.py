"""Results of the resets and reboots recovery asked the hosts for."""

from __future__ import annotations

from pydantic import AwareDatetime

from services.recovery.domain.host_actions import HostAction, HostActionResult, command_id
from services.recovery.domain.incidents._model import Incident, IncidentState, Transition, escalate, ignore
from services.recovery.domain.incidents._scope import drains_node


def host_action_of(incident: Incident) -> HostAction:
    """The device action that verifies this incident: a node reboot after a node drain, else a GPU reset."""
    return "reboot_node" if drains_node(incident) else "reset_gpu"


def asked_action(incident: Incident) -> str | None:
    """The command id of the latest reset or reboot asked for (the latest entry into verifying), if any.

    The command is sent with the transition that enters verifying, so its step is that history's length.
    """
    steps = [n for n, c in enumerate(incident.history, start=1) if c.state is IncidentState.VERIFYING]
    if not steps:
        return None
    return command_id(incident_id=incident.id, action=host_action_of(incident), step=steps[-1])


def record_host_action(incident: Incident, *, result: HostActionResult, at: AwareDatetime) -> Transition:
    """The result of the latest reset or reboot asked for is recorded on the incident, once. While the
    incident verifies, a failed or refused one escalates at once and a succeeded one lets the health check
    go on (the readings after the action still decide). Heard after the incident moved on (the readings
    decided first), it is only recorded.

    A result of an earlier action, or one heard again, changes nothing.
    """
    if result.command_id != asked_action(incident):
        return ignore(incident)
    if any(a.command_id == result.command_id for a in incident.actions):
        return ignore(incident)
    recorded = incident.model_copy(update={"actions": (*incident.actions, result)})
    if result.ok or incident.state is not IncidentState.VERIFYING:
        return Transition(incident=recorded)
    return escalate(recorded, reason=result.describe(), at=at)
