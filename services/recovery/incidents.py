"""The incident: one per fault, and the state machine that recovers from it.

Each transition takes the incident and what just happened, and returns the new incident with the commands
to send. Events arrive at least once and sometimes late, so a transition that does not apply to the
incident's state is ignored (the incident comes back unchanged), never an error.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from enum import StrEnum

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from services.recovery.catalog import Action
from services.recovery.classify import Classification
from services.recovery.commands import (
    Command,
    DrainGpu,
    DrainNode,
    Escalate,
    MigrateWorkload,
    RebootNode,
    ResetGpu,
    RestartWorkload,
    ReturnGpuToService,
    ReturnNodeToService,
)
from services.recovery.correlate import Cause, Diagnosis, RecentFault
from services.recovery.migrations import Migration, MigrationPhase, apply_progress

__all__ = [
    "HOLDING_STATES",
    "OUT_OF_SERVICE",
    "TERMINAL_STATES",
    "Incident",
    "IncidentState",
    "RecoveryPolicy",
    "StateChange",
    "Transition",
    "adopt_workloads",
    "check_deadline",
    "drain_completed",
    "drain_in_effect",
    "drains_node",
    "leaves_out_of_service",
    "move_strays",
    "record_failure",
    "record_health_check",
    "record_progress",
    "requested_drain",
    "start_diagnosis",
    "start_remediation",
]


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


def _ignored(incident: Incident) -> Transition:
    return Transition(incident=incident, ignored=True)


def _move(
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


def _escalate(incident: Incident, *, reason: str, at: AwareDatetime) -> Transition:
    return _move(
        incident,
        IncidentState.ESCALATED,
        at=at,
        commands=(Escalate(reason=f"{incident.id} {incident.fault_type}: {reason}"),),
        reason=reason,
        escalation_reason=reason,
    )


def start_diagnosis(incident: Incident, *, at: AwareDatetime) -> Transition:
    """detected → diagnosing: recovery starts looking at the telemetry window."""
    if incident.state is not IncidentState.DETECTED:
        return _ignored(incident)
    return _move(incident, IncidentState.DIAGNOSING, at=at)


# Two or more failing peers (see correlate._node): one other failure on the node may be coincidence.
WIDEN_MIN_CONFIDENCE = 0.8


def _node_wide(incident: Incident) -> bool:
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
    return isinstance(_drain_command(incident), DrainNode)


def _drain_command(incident: Incident) -> Command:
    reason = f"{incident.id} {incident.fault_type}"
    if _node_wide(incident) or incident.gpu is None:
        return DrainNode(node=incident.node, reason=reason)
    return DrainGpu(gpu=incident.gpu, reason=reason)


def start_remediation(
    incident: Incident,
    *,
    diagnosis: Diagnosis | None,
    at: AwareDatetime,
    node_workload_ids: Sequence[str] = (),
) -> Transition:
    """diagnosing → the catalog's immediate action: restart in place, drain, or escalate.

    node_workload_ids are every workload on the node: they join the incident when the drain is node-wide.
    """
    if incident.state is not IncidentState.DIAGNOSING:
        return _ignored(incident)
    incident = incident.model_copy(update={"diagnosis": diagnosis})
    action = incident.classification.action
    if action is Action.ESCALATE:
        return _escalate(incident, reason="the catalog says a person must decide", at=at)
    if action in (Action.IGNORE, Action.RESTART_WORKLOAD):
        restarts = tuple(RestartWorkload(workload_id=w) for w in incident.workload_ids)
        return _begin_migrations(incident, commands=restarts, at=at)
    if _node_wide(incident):
        extra = tuple(w for w in node_workload_ids if w not in incident.workload_ids)
        incident = incident.model_copy(update={"workload_ids": incident.workload_ids + extra})
    return _move(incident, IncidentState.DRAINING, at=at, commands=(_drain_command(incident),))


def drain_completed(incident: Incident, *, at: AwareDatetime) -> Transition:
    """draining → migrating: inventory drained the GPU or node, so move its workloads away."""
    if incident.state is not IncidentState.DRAINING:
        return _ignored(incident)
    return _begin_migrations(incident, commands=_moves_away(incident, incident.workload_ids), at=at)


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


def adopt_workloads(incident: Incident, *, workload_ids: Sequence[str], at: AwareDatetime) -> Transition:
    """Workloads found on the GPU (or node) after detection join the incident and are moved too.

    A placement can land on the GPU between detection and the drain taking effect; without this it
    would stay on a drained GPU. While draining, they are simply added (the drain's completion moves
    them all); once migrating or verifying, each gets its migration now. An incident that restarts
    workloads in place adopts nothing: its GPU stays in service.
    """
    new = tuple(w for w in dict.fromkeys(workload_ids) if w not in incident.workload_ids)
    if not new or incident.state not in HOLDING_STATES or not requested_drain(incident):
        return _ignored(incident)
    grown = incident.model_copy(update={"workload_ids": (*incident.workload_ids, *new)})
    if incident.state is IncidentState.DRAINING:
        return Transition(incident=grown)
    moves = _moves_away(incident, new)
    migrations = (*incident.migrations, *(Migration(workload_id=w) for w in new))
    if incident.state is IncidentState.VERIFYING:
        reason = "workloads found on the drained GPU"
        return _move(grown, IncidentState.MIGRATING, at=at, commands=moves, reason=reason,
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
        return _ignored(incident)
    listed = tuple(dict.fromkeys((*incident.workload_ids, *new)))
    return Transition(
        incident=incident.model_copy(update={"workload_ids": listed}), commands=_moves_away(incident, new)
    )


def _moves_away(incident: Incident, workload_ids: Sequence[str]) -> tuple[Command, ...]:
    away = None if isinstance(_drain_command(incident), DrainNode) else incident.gpu
    return tuple(MigrateWorkload(workload_id=w, away_from_gpu=away) for w in workload_ids)


def _begin_migrations(incident: Incident, *, commands: tuple[Command, ...], at: AwareDatetime) -> Transition:
    migrations = tuple(Migration(workload_id=w) for w in incident.workload_ids)
    moved = _move(incident, IncidentState.MIGRATING, at=at, commands=commands, migrations=migrations)
    if migrations:
        return moved
    # Nothing ran on the GPU: the workloads are trivially safe already.
    after = _workloads_safe(moved.incident, at=at)
    return after.model_copy(update={"commands": commands + after.commands})


def record_progress(
    incident: Incident, *, workload_id: str, phase: MigrationPhase, percent: int, at: AwareDatetime
) -> Transition:
    """A migration moved forward; once every workload runs again, verify or close the incident."""
    if incident.state is not IncidentState.MIGRATING:
        return _ignored(incident)
    migrations = list(incident.migrations)
    for i, migration in enumerate(migrations):
        if migration.workload_id == workload_id:
            updated = apply_progress(migration, phase=phase, percent=percent, at=at)
            if updated is None:
                return _ignored(incident)
            migrations[i] = updated
            break
    else:
        return _ignored(incident)
    incident = incident.model_copy(update={"migrations": tuple(migrations)})
    if all(m.done for m in migrations):
        return _workloads_safe(incident, at=at)
    return Transition(incident=incident)


def _workloads_safe(incident: Incident, *, at: AwareDatetime) -> Transition:
    """Every workload runs again: recovery for users is done; the GPU itself may still need work."""
    incident = incident.model_copy(update={"recovered_at": at})
    if incident.repeat_of is not None:
        # The same fault came back soon after a recovery: the GPU is not to be trusted a second time.
        return _escalate(incident, reason=f"workloads moved; repeat of recovered {incident.repeat_of}", at=at)
    action = incident.classification.action
    if action in (Action.IGNORE, Action.RESTART_WORKLOAD):
        return _move(incident, IncidentState.RESOLVED, at=at, reason="workloads restarted")
    if not incident.classification.recoverable:
        return _escalate(incident, reason="workloads moved; hardware needs a person", at=at)
    if isinstance(_drain_command(incident), DrainNode):
        return _move(incident, IncidentState.VERIFYING, at=at, commands=(RebootNode(node=incident.node),))
    assert incident.gpu is not None  # a GPU-scoped drain always has a GPU
    return _move(incident, IncidentState.VERIFYING, at=at, commands=(ResetGpu(gpu=incident.gpu),))


def record_health_check(incident: Incident, *, passed: bool, at: AwareDatetime) -> Transition:
    """verifying → resolved (back into service) when the check passes, else escalated."""
    if incident.state is not IncidentState.VERIFYING:
        return _ignored(incident)
    if not passed:
        return _escalate(incident, reason="health check failed after reset", at=at)
    back: Command
    if isinstance(_drain_command(incident), DrainNode):
        back = ReturnNodeToService(node=incident.node)
    else:
        assert incident.gpu is not None
        back = ReturnGpuToService(gpu=incident.gpu)
    return _move(incident, IncidentState.RESOLVED, at=at, commands=(back,), reason="health check passed")


def record_failure(incident: Incident, *, reason: str, at: AwareDatetime) -> Transition:
    """Any open state → escalated: a drain, migration, reset or reboot failed."""
    if not incident.is_open:
        return _ignored(incident)
    return _escalate(incident, reason=reason, at=at)


def check_deadline(incident: Incident, *, now: AwareDatetime, policy: RecoveryPolicy) -> Transition:
    """Escalate an open incident once the recovery deadline after detection has passed."""
    if not incident.is_open or now < incident.detected_at + policy.deadline:
        return _ignored(incident)
    return _escalate(incident, reason=f"not recovered within {policy.deadline}", at=now)
