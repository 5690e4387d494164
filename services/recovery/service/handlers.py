"""Event handlers: faults open or fold incidents; drains, migration steps and placements move them on."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TypeAlias

from libs.common.bus.handlers import HandlerContext, Handlers
from libs.common.events.agent import HostActionDoneV1, MigrationStepV1
from libs.common.events.alerting import AlertFiredV1
from libs.common.events.inventory import GpuHealthChangedV1
from libs.common.events.scheduler import WorkloadEndedV1, WorkloadPlacedV1, WorkloadReallocatedV1
from libs.common.events.telemetry import FaultSignaledV1
from services.recovery.adapters.sample_window import SampleWindow
from services.recovery.adapters.unit_of_work import PostgresRecoveryUnitOfWork
from services.recovery.domain.catalog import Action, FaultCatalog, catalog_finding
from services.recovery.domain.classify import FaultSignal, classify
from services.recovery.domain.correlate import CorrelationThresholds, Diagnosis, FaultContext, diagnose
from services.recovery.domain.detection import DetectionOutcome, fails_health_check, ingest_signal
from services.recovery.domain.host_actions import HostActionResult
from services.recovery.domain.incidents import (
    HOLDING_STATES,
    OUT_OF_SERVICE,
    TERMINAL_STATES,
    Incident,
    IncidentState,
    Transition,
    adopt_workloads,
    asked_action,
    drain_completed,
    drain_in_effect,
    drains_node,
    leaves_out_of_service,
    move_strays,
    record_health_check,
    record_host_action,
    record_progress,
    requested_drain,
    start_diagnosis,
    start_remediation,
    still_moving,
)
from services.recovery.domain.placements import Placement
from services.recovery.domain.workload_moves import MigrationPhase
from services.recovery.service import metrics
from services.recovery.service.config import RecoveryConfig
from services.recovery.service.effects import Effects, apply
from services.recovery.service.signals import from_alert, from_fault
from services.recovery.service.unit_of_work import RecoveryUnitOfWork

__all__ = ["Context", "RecoveryDeps", "handlers", "ingest"]

log = logging.getLogger(__name__)


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True, kw_only=True)
class RecoveryDeps:
    """What the handlers need besides the unit of work: catalog, settings, telemetry window and clock."""

    settings: RecoveryConfig
    catalog: FaultCatalog
    window: SampleWindow | None = None
    clock: Callable[[], datetime] = field(default=_utcnow)


#: What every handler of recovery gets: its deps and recovery's unit of work.
Context: TypeAlias = HandlerContext[RecoveryDeps, RecoveryUnitOfWork]
#: The states of an open incident.
_OPEN = tuple(state for state in IncidentState if state not in TERMINAL_STATES)


def _effects(deps: RecoveryDeps, now: datetime) -> Effects:
    return Effects(settle=deps.settings.settle_timedelta, now=now)


async def on_fault_signaled(event: FaultSignaledV1, ctx: Context) -> None:
    await ingest(from_fault(event), uow=ctx.uow, deps=ctx.deps)


async def on_alert_fired(event: AlertFiredV1, ctx: Context) -> None:
    signal = from_alert(event)
    if signal is not None:
        await ingest(signal, uow=ctx.uow, deps=ctx.deps)


async def ingest(signal: FaultSignal, *, uow: RecoveryUnitOfWork, deps: RecoveryDeps) -> None:
    """Classify a signal, fold it or open an incident, and start remediating a new one."""
    now = deps.clock()
    incidents, places = uow.incidents, uow.placements
    # One signal of a node at a time, across consumers and replicas: two signals of one fault (XID 79
    # and its lost GPU) handled side by side would each see no incident and open one each.
    await incidents.lock_node(signal.node)
    recent = await incidents.recent_on_node(signal.node, since=now - deps.settings.policy.fold_window)
    classification = classify(signal, catalog=deps.catalog)
    busy = {w for i in recent if i.is_open for w in i.workload_ids}
    node_placed = [p for p in await places.on_node(signal.node) if p.workload_id not in busy]
    node_wide = signal.gpu is None or classification.action is Action.REBOOT_NODE
    affected = [p for p in node_placed if node_wide or signal.gpu in p.gpus]
    health = await places.health_of([signal.gpu]) if signal.gpu is not None else {}
    detection = ingest_signal(
        signal=signal,
        classification=classification,
        incidents=recent,
        workload_ids=[p.workload_id for p in affected],
        incident_id=f"inc-{uuid.uuid4().hex[:16]}",
        detected_at=now,
        policy=deps.settings.policy,
        out_of_service=health.get(signal.gpu or "") in OUT_OF_SERVICE,
    )
    metrics.SIGNALS.labels(detection.outcome.value).inc()
    fx = _effects(deps, now)
    if detection.outcome is DetectionOutcome.OPENED and detection.incident is not None:
        await _open(uow, detection.incident, deps=deps, recent=recent, node_placed=node_placed, fx=fx)
    elif detection.outcome is DetectionOutcome.FOLDED and detection.incident is not None:
        folded = detection.incident
        before = next(i for i in recent if i.id == folded.id)
        await apply(uow, Transition(incident=folded), before=before, fx=fx)
        recent = [folded if i.id == folded.id else i for i in recent]
    await _fail_health_checks(uow, recent, signal=signal, fx=fx, readings_decide=deps.window is not None)


async def _open(
    uow: RecoveryUnitOfWork,
    incident: Incident,
    *,
    deps: RecoveryDeps,
    recent: Sequence[Incident],
    node_placed: Sequence[Placement],
    fx: Effects,
) -> None:
    first = start_diagnosis(incident, at=fx.now)
    diagnosis = await _diagnose(first.incident, deps=deps, recent=recent)
    second = start_remediation(
        first.incident,
        diagnosis=diagnosis,
        at=fx.now,
        node_workload_ids=[p.workload_id for p in node_placed],
    )
    both = Transition(incident=second.incident, commands=first.commands + second.commands)
    await apply(uow, both, before=None, fx=fx)
    if both.incident.gpu is not None:
        health = await uow.placements.health_of([both.incident.gpu])
        if drain_in_effect(both.incident, gpu_health=health.get(both.incident.gpu)):
            # Inventory will report no change for this drain: it is complete already.
            await _drain_done(uow, both.incident, gpu=both.incident.gpu, fx=fx)


async def _diagnose(incident: Incident, *, deps: RecoveryDeps, recent: Sequence[Incident]) -> Diagnosis:
    at = incident.fault_at
    own, peers = [], []
    if deps.window is not None:
        if incident.gpu is not None:
            own = await deps.window.samples(incident.gpu, until=at)
        peers = await deps.window.peers(incident.node, exclude=incident.gpu, until=at)
    context = FaultContext(gpu=incident.gpu, node=incident.node, workload_ids=incident.workload_ids, at=at)
    limits = CorrelationThresholds(recent_fault_window=timedelta(seconds=deps.settings.correlation_window_s))
    entry = deps.catalog.entries.get(incident.fault_type)
    return diagnose(
        fault=context,
        limits=limits,
        own_samples=own,
        peer_samples=peers,
        recent_faults=[i.as_recent_fault() for i in recent if i.id != incident.id],
        prior=catalog_finding(entry) if entry is not None else None,
    )


async def _fail_health_checks(
    uow: RecoveryUnitOfWork,
    recent: Sequence[Incident],
    *,
    signal: FaultSignal,
    fx: Effects,
    readings_decide: bool,
) -> None:
    """A new fault where an incident awaits its health check means the check failed."""
    for incident in recent:
        if fails_health_check(incident, signal, readings_decide=readings_decide):
            failed = record_health_check(incident, passed=False, at=fx.now)
            await apply(uow, failed, before=incident, fx=fx)


async def on_gpu_health_changed(event: GpuHealthChangedV1, ctx: Context) -> None:
    places = ctx.uow.placements
    await places.set_health(gpu=event.gpu_uuid, node=event.node, health=event.health)
    if event.health not in OUT_OF_SERVICE:
        return
    fx = _effects(ctx.deps, ctx.deps.clock())
    for incident in await ctx.uow.incidents.open_in_state(event.node, IncidentState.DRAINING):
        if drains_node(incident) or incident.gpu == event.gpu_uuid:
            await _drain_done(ctx.uow, incident, gpu=event.gpu_uuid, fx=fx)
    if await _open_drains(ctx.uow, node=event.node, gpus={event.gpu_uuid}):
        return
    # No open incident holds the GPU: one escalated before its drain took effect may have.
    on_it = await places.on_gpu(event.gpu_uuid)
    await _move_strays(
        ctx.uow, node=event.node, gpus={event.gpu_uuid}, placements=on_it, fx=fx, skip_asked=True
    )


async def _drain_done(uow: RecoveryUnitOfWork, incident: Incident, *, gpu: str, fx: Effects) -> None:
    """The drain holds: every workload now on the GPU (or node) joins the incident and is moved.

    Workloads another open incident of the node is moving already are left to it (see still_moving).
    """
    places = uow.placements
    on_it = await places.on_node(incident.node) if drains_node(incident) else await places.on_gpu(gpu)
    others = [i for i in await uow.incidents.open_in_state(incident.node, *_OPEN) if i.id != incident.id]
    found = [p.workload_id for p in on_it if not any(still_moving(i, p.workload_id) for i in others)]
    adopted = adopt_workloads(incident, workload_ids=found, at=fx.now)
    await apply(uow, drain_completed(adopted.incident, at=fx.now), before=incident, fx=fx)


async def _open_drains(uow: RecoveryUnitOfWork, *, node: str, gpus: set[str]) -> list[Incident]:
    """Open incidents holding one of these GPUs (or their node) drained, oldest first (locked)."""
    found = await uow.incidents.open_in_state(node, *HOLDING_STATES)
    return [i for i in found if requested_drain(i) and (drains_node(i) or i.gpu in gpus)]


async def _move_strays(
    uow: RecoveryUnitOfWork,
    *,
    node: str,
    gpus: set[str],
    placements: Sequence[Placement],
    fx: Effects,
    skip_asked: bool = False,
) -> None:
    """Move workloads off GPUs the latest escalated incident holding them left out of service.

    skip_asked leaves alone the workloads that incident already asked to move (a placement it has
    not heard of yet may still be the one it moves); a placement just reported is never skipped.
    """
    for incident in await uow.incidents.escalated_on_node(node):
        if leaves_out_of_service(incident) and (drains_node(incident) or incident.gpu in gpus):
            # A move asked for and not finished yet takes the workload away already: never ask twice.
            asked = {m.workload_id for m in incident.migrations if skip_asked or not m.done}
            strays = [p.workload_id for p in placements if p.workload_id not in asked]
            await apply(uow, move_strays(incident, workload_ids=strays), before=incident, fx=fx)
            return


async def on_migration_step(event: MigrationStepV1, ctx: Context) -> None:
    fx = _effects(ctx.deps, ctx.deps.clock())
    phase = MigrationPhase(event.phase)
    # The host's instant (an older agent's envelope, written at the fact), as the scheduler and billing
    # take it: the running step is the workload running again, whenever recovery gets round to it.
    host_at = event.at or ctx.envelope.time
    if host_at.tzinfo is None:
        host_at = host_at.replace(tzinfo=UTC)  # the wire's times are UTC
    for incident in await ctx.uow.incidents.migrating_for(event.workload_id):
        moved = record_progress(
            incident,
            workload_id=event.workload_id,
            phase=phase,
            percent=event.percent,
            at=fx.now,
            host_at=host_at,
            restored=event.restored,
            note=event.note,
        )
        step = next((m for m in moved.incident.migrations if m.workload_id == event.workload_id), None)
        await apply(ctx.uow, moved, before=incident, fx=fx, progress=step)


async def on_host_action_done(event: HostActionDoneV1, ctx: Context) -> None:
    if event.incident_id is None or event.action == "apply_mig":
        return  # a MIG layout inventory changed: no incident waits on it
    incident = await ctx.uow.incidents.get(event.incident_id)
    if incident is None:
        log.info("%s %s of unknown incident %s ignored", event.action, event.outcome, event.incident_id)
        return
    if event.command_id != asked_action(incident):
        log.info(
            "%s %s for incident %s ignored: command %s is not its latest action asked (%s)",
            event.action, event.outcome, incident.id, event.command_id, asked_action(incident),
        )  # fmt: skip
        return
    now = ctx.deps.clock()
    result = _action_result(event, heard_at=now)
    await apply(
        ctx.uow,
        record_host_action(incident, result=result, at=now),
        before=incident,
        fx=_effects(ctx.deps, now),
    )


def _action_result(event: HostActionDoneV1, *, heard_at: datetime) -> HostActionResult:
    at = event.at or heard_at
    return HostActionResult(
        command_id=event.command_id,
        action=event.action,
        outcome=event.outcome,
        node=event.node,
        gpu=event.gpu_uuid,
        reason=event.reason,
        commands=tuple(tuple(argv) for argv in event.commands),
        exit_code=event.exit_code,
        output=event.output,
        at=at if at.tzinfo is not None else at.replace(tzinfo=UTC),  # the wire's times are UTC
    )


async def on_workload_placed(event: WorkloadPlacedV1, ctx: Context) -> None:
    places = ctx.uow.placements
    placement = Placement(
        workload_id=event.workload_id,
        tenant_id=event.tenant_id,
        placement_id=event.placement_id,
        node=event.node,
        gpus=tuple(a.gpu_uuid for a in event.allocations),
    )
    await places.place(placement, priority=event.priority)
    await _keep_off_out_of_service(placement, ctx)


async def on_workload_reallocated(event: WorkloadReallocatedV1, ctx: Context) -> None:
    # The host gave the running placement other GPUs of its node: a fault on them is now its fault, and
    # one of them taken out of service moves it, as a placement onto it would.
    gpus = tuple(a.gpu_uuid for a in event.allocations)
    moved = await ctx.uow.placements.move(
        workload_id=event.workload_id, placement_id=event.placement_id, gpus=gpus
    )
    if moved is not None:
        await _keep_off_out_of_service(moved, ctx)


async def _keep_off_out_of_service(placement: Placement, ctx: Context) -> None:
    """A placement on a GPU an open incident is draining, or one already out of service, moves."""
    places = ctx.uow.placements
    fx, gpus = _effects(ctx.deps, ctx.deps.clock()), set(placement.gpus)
    holding = await _open_drains(ctx.uow, node=placement.node, gpus=gpus)
    if holding:
        # A placement onto a GPU an open incident is taking out of service must move again, once: by
        # the oldest incident holding it, unless one of them lists the workload already.
        if not any(placement.workload_id in i.workload_ids for i in holding):
            moved = adopt_workloads(holding[0], workload_ids=[placement.workload_id], at=fx.now)
            await apply(ctx.uow, moved, before=holding[0], fx=fx)
        return
    health = await places.health_of(placement.gpus)
    out = {gpu for gpu, h in health.items() if h in OUT_OF_SERVICE}
    if out:
        # Placed before the scheduler saw the drain, and heard of only after the incident closed.
        await _move_strays(ctx.uow, node=placement.node, gpus=out, placements=[placement], fx=fx)


async def on_workload_ended(event: WorkloadEndedV1, ctx: Context) -> None:
    await ctx.uow.placements.end(workload_id=event.workload_id, placement_id=event.placement_id)


def handlers(deps: RecoveryDeps) -> Handlers[RecoveryDeps, PostgresRecoveryUnitOfWork]:
    """The main consumer's handlers: faults and alerts, GPU health, migration steps, the hosts' resets and
    reboots, and placements."""
    return (
        Handlers(deps, uow=PostgresRecoveryUnitOfWork)
        .on(FaultSignaledV1, on_fault_signaled)
        .on(AlertFiredV1, on_alert_fired)
        .on(GpuHealthChangedV1, on_gpu_health_changed)
        .on(MigrationStepV1, on_migration_step)
        .on(HostActionDoneV1, on_host_action_done)
        .on(WorkloadPlacedV1, on_workload_placed)
        .on(WorkloadEndedV1, on_workload_ended)
        .on(WorkloadReallocatedV1, on_workload_reallocated)
    )
