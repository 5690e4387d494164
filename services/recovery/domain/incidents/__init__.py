"""The incident: one per fault, and the state machine that recovers from it.

Each transition takes the incident and what just happened, and returns the new incident with the commands
to send. Events arrive at least once and sometimes late, so a transition that does not apply to the
incident's state is ignored (the incident comes back unchanged), never an error.

The parts: ``_model`` (the incident, its states and policy), ``_scope`` (what a drain covers and holds),
``_lifecycle`` (the recovery steps), ``_adoption`` (workloads found on drained hardware) and ``_actions``
(what the hosts report of the resets and reboots asked for).
"""

from __future__ import annotations

from services.recovery.domain.incidents._actions import asked_action, host_action_of, record_host_action
from services.recovery.domain.incidents._adoption import adopt_workloads, move_strays, still_moving
from services.recovery.domain.incidents._lifecycle import (
    check_deadline,
    deadline_of,
    drain_completed,
    record_failure,
    record_health_check,
    record_progress,
    start_diagnosis,
    start_remediation,
    verifying_since,
)
from services.recovery.domain.incidents._model import (
    TERMINAL_STATES,
    Incident,
    IncidentState,
    RecoveryPolicy,
    StateChange,
    Transition,
)
from services.recovery.domain.incidents._scope import (
    HOLDING_STATES,
    OUT_OF_SERVICE,
    WIDEN_MIN_CONFIDENCE,
    drain_in_effect,
    drains_node,
    leaves_out_of_service,
    requested_drain,
)

__all__ = [
    "HOLDING_STATES",
    "OUT_OF_SERVICE",
    "TERMINAL_STATES",
    "WIDEN_MIN_CONFIDENCE",
    "Incident",
    "IncidentState",
    "RecoveryPolicy",
    "StateChange",
    "Transition",
    "adopt_workloads",
    "asked_action",
    "check_deadline",
    "deadline_of",
    "drain_completed",
    "drain_in_effect",
    "drains_node",
    "host_action_of",
    "leaves_out_of_service",
    "move_strays",
    "record_failure",
    "record_health_check",
    "record_host_action",
    "record_progress",
    "requested_drain",
    "start_diagnosis",
    "start_remediation",
    "still_moving",
    "verifying_since",
]
