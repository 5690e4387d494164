"""The incident, its states and timing policy, and the transition primitives every step shares."""

from __future__ import annotations

from datetime import timedelta
from enum import StrEnum

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from services.recovery.domain.classify import Classification
from services.recovery.domain.commands import Command, Escalate
from services.recovery.domain.correlate import Diagnosis, RecentFault
from services.recovery.domain.host_actions import HostActionResult
from services.recovery.domain.workload_moves import Migration


class IncidentState(StrEnum):
    """Where an incident stands; resolved and escalated are final."""

    DETECTED = "detected"
    DIAGNOSING = "diagnosing"
    DRAINING = "draining"
    MIGRATING = "migrating"
    VERIFYING = "verifying"
    RESOLVED = "resolved"
    ESCALATED = "escalated"


TERMINAL_STATES = frozenset({IncidentState.RESOLVED, IncidentState.ESCALATED})


class RecoveryPolicy(BaseModel):
    """Timing rules for incidents."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fold_window: timedelta = Field(default=timedelta(minutes=10), description="Repeats this close fold")
    deadline: timedelta = Field(default=timedelta(minutes=3), description="Escalate if unfinished by then")
    progress_grace: timedelta = Field(
        default=timedelta(seconds=30),
        description="Past the deadline, a migrating incident waits while a migration moved this recently",
    )
    deadline_cap: timedelta = Field(
        default=timedelta(minutes=6),
        description="Escalate by then after detection even while migrations still report progress",
    )


class StateChange(BaseModel):
    """One entry of an incident's history."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    state: IncidentState
    at: AwareDatetime
    reason: str = ""


class Incident(BaseModel):
    """One fault on one GPU (or node), its repeats, and its recovery so far."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    classification: Classification
    gpu: str | None
    node: str
    state: IncidentState = IncidentState.DETECTED
    fault_at: AwareDatetime = Field(description="When the first signal says the fault happened")
    detected_at: AwareDatetime = Field(description="When recovery learned of it")
    last_seen: AwareDatetime = Field(description="When the latest repeat happened")
    count: int = Field(default=1, ge=1, description="Signals folded into this incident")
    workload_ids: tuple[str, ...] = ()
    migrations: tuple[Migration, ...] = ()
    diagnosis: Diagnosis | None = None
    recovered_at: AwareDatetime | None = Field(default=None, description="When every workload ran again")
    closed_at: AwareDatetime | None = None
    escalation_reason: str | None = None
    history: tuple[StateChange, ...] = ()
    repeat_of: str | None = Field(
        default=None, description="Recovered incident this fault repeats within the fold window"
    )
    actions: tuple[HostActionResult, ...] = Field(
        default=(), description="Resets and reboots the hosts reported for this incident, oldest first"
    )

    @property
    def fault_type(self) -> str:
        """The catalog key of the fault."""
        return self.classification.fault_type

    @property
    def is_open(self) -> bool:
        """Whether recovery still works on it."""
        return self.state not in TERMINAL_STATES

    def as_recent_fault(self) -> RecentFault:
        """This incident as the correlation rules see other faults."""
        return RecentFault(
            fault_type=self.fault_type,
            gpu=self.gpu,
            node=self.node,
            workload_ids=self.workload_ids,
            at=self.fault_at,
        )


class Transition(BaseModel):
    """The incident after something happened, and the commands that causes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    incident: Incident
    commands: tuple[Command, ...] = ()
    ignored: bool = Field(default=False, description="The event did not apply; the incident is unchanged")


def ignore(incident: Incident) -> Transition:
    """The incident unchanged: the event does not apply to its state."""
    return Transition(incident=incident, ignored=True)


def move(
    incident: Incident,
    state: IncidentState,
    *,
    at: AwareDatetime,
    commands: tuple[Command, ...] = (),
    reason: str = "",
    **changes: object,
) -> Transition:
    """Enter a state, record it in the history, and stamp closed_at when the state is final."""
    update: dict[str, object] = {
        "state": state,
        "history": (*incident.history, StateChange(state=state, at=at, reason=reason)),
    }
    if state in TERMINAL_STATES:
        update["closed_at"] = at
    moved = incident.model_copy(update=update | changes)
    return Transition(incident=moved, commands=commands)


def escalate(incident: Incident, *, reason: str, at: AwareDatetime) -> Transition:
    return move(
        incident,
        IncidentState.ESCALATED,
        at=at,
        commands=(Escalate(reason=f"{incident.id} {incident.fault_type}: {reason}"),),
        reason=reason,
        escalation_reason=reason,
    )
