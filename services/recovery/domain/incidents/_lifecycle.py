"""The recovery steps: diagnose, remediate, migrate, verify, and escalate on failure or deadline."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import AwareDatetime

from services.recovery.domain.catalog import Action
from services.recovery.domain.commands import (
    Command,
    DrainNode,
    RebootNode,
    ResetGpu,
    RestartWorkload,
    ReturnGpuToService,
    ReturnNodeToService,
)
from services.recovery.domain.correlate import Diagnosis
from services.recovery.domain.incidents._model import (
    Incident,
    IncidentState,
    RecoveryPolicy,
    Transition,
    escalate,
    ignore,
    move,
)
from services.recovery.domain.incidents._scope import drain_command, moves_away, node_wide
from services.recovery.domain.workload_moves import Migration, MigrationPhase, apply_progress


def start_diagnosis(incident: Incident, *, at: AwareDatetime) -> Transition:
    """detected → diagnosing: recovery starts looking at the telemetry window."""
    if incident.state is not IncidentState.DETECTED:
        return ignore(incident)
    return move(incident, IncidentState.DIAGNOSING, at=at)


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
        return ignore(incident)
    incident = incident.model_copy(update={"diagnosis": diagnosis})
    action = incident.classification.action
    if action is Action.ESCALATE:
        return escalate(incident, reason="the catalog says a person must decide", at=at)
    if action in (Action.IGNORE, Action.RESTART_WORKLOAD):
        restarts = tuple(RestartWorkload(workload_id=w) for w in incident.workload_ids)
        return _begin_migrations(incident, commands=restarts, at=at)
    if node_wide(incident):
        extra = tuple(w for w in node_workload_ids if w not in incident.workload_ids)
        incident = incident.model_copy(update={"workload_ids": incident.workload_ids + extra})
    return move(incident, IncidentState.DRAINING, at=at, commands=(drain_command(incident),))


def drain_completed(incident: Incident, *, at: AwareDatetime) -> Transition:
    """draining → migrating: inventory drained the GPU or node, so move its workloads away."""
    if incident.state is not IncidentState.DRAINING:
        return ignore(incident)
    return _begin_migrations(incident, commands=moves_away(incident, incident.workload_ids), at=at)


def _begin_migrations(incident: Incident, *, commands: tuple[Command, ...], at: AwareDatetime) -> Transition:
    migrations = tuple(Migration(workload_id=w) for w in incident.workload_ids)
    moved = move(incident, IncidentState.MIGRATING, at=at, commands=commands, migrations=migrations)
    if migrations:
        return moved
    # Nothing ran on the GPU: the workloads are trivially safe already.
    after = _workloads_safe(moved.incident, at=at)
    return after.model_copy(update={"commands": commands + after.commands})


def record_progress(
    incident: Incident,
    *,
    workload_id: str,
    phase: MigrationPhase,
    percent: int,
    at: AwareDatetime,
    host_at: AwareDatetime | None = None,
    restored: bool | None = None,
    note: str = "",
) -> Transition:
    """A migration moved forward; once every workload runs again, verify or close the incident.

    at is when recovery heard of the step; host_at when the host says it happened (see recovered_at);
    restored and note what the host said of it (whether the workload restarted from the start, and why).
    """
    if incident.state is not IncidentState.MIGRATING:
        return ignore(incident)
    migrations = list(incident.migrations)
    for i, migration in enumerate(migrations):
        if migration.workload_id == workload_id:
            updated = apply_progress(
                migration, phase=phase, percent=percent, at=at, host_at=host_at, restored=restored, note=note
            )
            if updated is None:
                return ignore(incident)
            migrations[i] = updated
            break
    else:
        return ignore(incident)
    incident = incident.model_copy(update={"migrations": tuple(migrations)})
    if all(m.done for m in migrations):
        return _workloads_safe(incident, at=at)
    return Transition(incident=incident)


def _workloads_safe(incident: Incident, *, at: AwareDatetime) -> Transition:
    """Every workload runs again: recovery for users is done; the GPU itself may still need work.

    recovered_at is the host's instant the last of them ran on its new placement (the running steps'
    own times), not when recovery heard of it: the SLO runs from detection to that fact.
    """
    incident = incident.model_copy(update={"recovered_at": _recovered_instant(incident, default=at)})
    if incident.repeat_of is not None:
        # The same fault came back soon after a recovery: the GPU is not to be trusted a second time.
        return escalate(incident, reason=f"workloads moved; repeat of {incident.repeat_of}", at=at)
    action = incident.classification.action
    if action in (Action.IGNORE, Action.RESTART_WORKLOAD):
        return move(incident, IncidentState.RESOLVED, at=at, reason="workloads restarted")
    if not incident.classification.recoverable:
        return escalate(incident, reason="workloads moved; hardware needs a person", at=at)
    if isinstance(drain_command(incident), DrainNode):
        return move(incident, IncidentState.VERIFYING, at=at, commands=(RebootNode(node=incident.node),))
    assert incident.gpu is not None  # a GPU-scoped drain always has a GPU
    return move(incident, IncidentState.VERIFYING, at=at, commands=(ResetGpu(gpu=incident.gpu),))


def _recovered_instant(incident: Incident, *, default: AwareDatetime) -> AwareDatetime:
    """When the last of the incident's workloads ran again, by the hosts' reports; default without any."""
    return max((m.ran_at for m in incident.migrations if m.ran_at is not None), default=default)


def verifying_since(incident: Incident) -> AwareDatetime | None:
    """When the latest reset or reboot was asked for (the latest entry into verifying), if any.

    No adapter reports when a reset or reboot finishes, so readings must be later than this to count.
    """
    verifying = [c.at for c in incident.history if c.state is IncidentState.VERIFYING]
    return verifying[-1] if verifying else None


def record_health_check(incident: Incident, *, passed: bool, at: AwareDatetime) -> Transition:
    """verifying → resolved (back into service) when the check passes, else escalated."""
    if incident.state is not IncidentState.VERIFYING:
        return ignore(incident)
    if not passed:
        return escalate(incident, reason="health check failed after reset", at=at)
    back: Command
    if isinstance(drain_command(incident), DrainNode):
        back = ReturnNodeToService(node=incident.node)
    else:
        assert incident.gpu is not None
        back = ReturnGpuToService(gpu=incident.gpu)
    return move(incident, IncidentState.RESOLVED, at=at, commands=(back,), reason="health check passed")


def record_failure(incident: Incident, *, reason: str, at: AwareDatetime) -> Transition:
    """Any open state → escalated: a drain, migration, reset or reboot failed."""
    if not incident.is_open:
        return ignore(incident)
    return escalate(incident, reason=reason, at=at)


_PROGRESSING = frozenset({IncidentState.MIGRATING, IncidentState.VERIFYING})


def deadline_of(incident: Incident, *, policy: RecoveryPolicy) -> AwareDatetime:
    """When an open incident escalates: the deadline after detection, later while migrations progress.

    Under load migrations queue and take longer, and escalating one that is visibly moving would page a
    person for work that is about to finish. So while migrating or verifying, the deadline is pushed to
    the grace period after the latest progress (the migrations starting, a migration step, the reset or
    reboot asked for), never past the cap.
    """
    due = incident.detected_at + policy.deadline
    if incident.state not in _PROGRESSING:
        return due
    entered = [c.at for c in incident.history if c.state in _PROGRESSING]
    moved = [m.updated_at for m in incident.migrations if m.updated_at is not None]
    latest = max([*entered, *moved], default=None)
    if latest is None:
        return due
    cap = incident.detected_at + max(policy.deadline_cap, policy.deadline)
    return min(max(due, latest + policy.progress_grace), cap)


def check_deadline(
    incident: Incident, *, now: AwareDatetime, policy: RecoveryPolicy, detail: str = ""
) -> Transition:
    """Escalate an open incident once its deadline (see deadline_of) passed; detail says what is missing."""
    if not incident.is_open or now < deadline_of(incident, policy=policy):
        return ignore(incident)
    reason = f"not recovered within {policy.deadline}" + (f": {detail}" if detail else "")
    return escalate(incident, reason=reason, at=now)
