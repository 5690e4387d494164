"""Event handlers: faults open or fold incidents; drains, migration steps and placements move them on."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol

from libs.common.bus.handlers import HandlerContext, Handlers
from libs.common.db.uow import UnitOfWork
from libs.common.events.agent import MigrationStepV1
from libs.common.events.alerting import AlertFiredV1
from libs.common.events.inventory import GpuHealthChangedV1
from libs.common.events.scheduler import WorkloadEndedV1, WorkloadPlacedV1
from libs.common.events.telemetry import FaultSignaledV1
from services.recovery.adapters.incident_store import IncidentStore
from services.recovery.adapters.placement_store import PlacementStore
from services.recovery.adapters.sample_window import SampleWindow
from services.recovery.domain.catalog import Action, FaultCatalog
from services.recovery.domain.classify import FaultSignal, classify
from services.recovery.domain.correlate import CorrelationThresholds, Diagnosis, FaultContext, diagnose
from services.recovery.domain.detection import DetectionOutcome, ingest_signal
from services.recovery.domain.incidents import (
    HOLDING_STATES,
    OUT_OF_SERVICE,
    Incident,
    IncidentState,
    Transition,
    adopt_workloads,
    drain_completed,
    drain_in_effect,
    drains_node,
    leaves_out_of_service,
    move_strays,
    record_health_check,
    record_progress,
    requested_drain,
    start_diagnosis,
    start_remediation,
)
from services.recovery.domain.placements import Placement
from services.recovery.domain.workload_moves import MigrationPhase
from services.recovery.service import metrics
from services.recovery.service.config import RecoveryConfig
from services.recovery.service.effects import Effects, apply
from services.recovery.service.signals import from_alert, from_fault

__all__ = ["PlacementMap", "RecoveryDeps", "handlers", "ingest"]


def _utcnow() -> datetime:
    return datetime.now(UTC)


class PlacementMap(Protocol):
    """The placement map and GPU health the handlers keep (PlacementStore; FakePlacementStore in tests)."""

    async def place(self, p: Placement, *, priority: float) -> None: ...

    async def end(self, *, workload_id: str, placement_id: str) -> None: ...

    async def on_gpu(self, gpu: str) -> list[Placement]: ...

    async def on_node(self, node: str) -> list[Placement]: ...

    async def set_health(self, *, gpu: str, node: str, health: str) -> None: ...

    async def health_of(self, gpus: Sequence[str]) -> dict[str, str]: ...


def _sql_placements(uow: UnitOfWork) -> PlacementMap:
    return PlacementStore(uow.conn)


@dataclass(frozen=True, slots=True, kw_only=True)
class RecoveryDeps:
    """What the handlers need besides the unit of work: catalog, settings, telemetry window, clock, stores."""

    settings: RecoveryConfig
    catalog: FaultCatalog
    window: SampleWindow | None = None
    clock: Callable[[], datetime] = field(default=_utcnow)
    placements: Callable[[UnitOfWork], PlacementMap] = _sql_placements


def _effects(deps: RecoveryDeps, now: datetime) -> Effects:
    return Effects(settle=deps.settings.settle_timedelta, now=now)


async def on_fault_signaled(event: FaultSignaledV1, ctx: HandlerContext[RecoveryDeps]) -> None:
    await ingest(from_fault(event), uow=ctx.uow, deps=ctx.deps)


async def on_alert_fired(event: AlertFiredV1, ctx: HandlerContext[RecoveryDeps]) -> None:
    signal = from_alert(event)
    if signal is not None:
        await ingest(signal, uow=ctx.uow, deps=ctx.deps)


async def ingest(signal: FaultSignal, *, uow: UnitOfWork, deps: RecoveryDeps) -> None:
    """Classify a signal, fold it or open an incident, and start remediating a new one."""
    now = deps.clock()
    incidents, places = IncidentStore(uow.conn), deps.placements(uow)
    recent = await incidents.recent_on_node(signal.node, since=now - deps.settings.policy.fold_window)
    classification = classify(signal, catalog=deps.catalog)
    busy = {w for i in recent if i.is_open for w in i.workload_ids}
    node_placed = [p for p in await places.on_node(signal.node) if p.workload_id not in busy]
    node_wide = signal.gpu is None or classification.action is Action.REBOOT_NODE
    affected = [p for p in node_placed if node_wide or signal.gpu in p.gpus]
    detection = ingest_signal(
        signal=signal,
        classification=classification,
        incidents=recent,
        workload_ids=[p.workload_id for p in affected],
        incident_id=f"inc-{uuid.uuid4().hex[:16]}",
        detected_at=now,
        policy=deps.settings.policy,
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
    await _fail_health_checks(uow, recent, signal=signal, fx=fx)


async def _open(
    uow: UnitOfWork,
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
        health = await deps.placements(uow).health_of([both.incident.gpu])
        if drain_in_effect(both.incident, gpu_health=health.get(both.incident.gpu)):
            # Inventory will report no change for this drain: it is complete already.
            await _drain_done(uow, both.incident, deps=deps, gpu=both.incident.gpu, fx=fx)


async def _diagnose(incident: Incident, *, deps: RecoveryDeps, recent: Sequence[Incident]) -> Diagnosis:
    at = incident.fault_at
    own, peers = [], []
    if deps.window is not None:
        if incident.gpu is not None:
            own = await deps.window.samples(incident.gpu, until=at)
        peers = await deps.window.peers(incident.node, exclude=incident.gpu, until=at)
    context = FaultContext(gpu=incident.gpu, node=incident.node, workload_ids=incident.workload_ids, at=at)
    limits = CorrelationThresholds(recent_fault_window=timedelta(seconds=deps.settings.correlation_window_s))
    return diagnose(
        fault=context,
        limits=limits,
        own_samples=own,
        peer_samples=peers,
        recent_faults=[i.as_recent_fault() for i in recent if i.id != incident.id],
    )


async def _fail_health_checks(
    uow: UnitOfWork, recent: Sequence[Incident], *, signal: FaultSignal, fx: Effects
) -> None:
    """A new fault where an incident awaits its health check means the check failed."""
    for incident in recent:
        if incident.state is not IncidentState.VERIFYING:
            continue
        if signal.gpu is None or incident.gpu == signal.gpu or drains_node(incident):
            failed = record_health_check(incident, passed=False, at=fx.now)
            await apply(uow, failed, before=incident, fx=fx)


async def on_gpu_health_changed(event: GpuHealthChangedV1, ctx: HandlerContext[RecoveryDeps]) -> None:
    places = ctx.deps.placements(ctx.uow)
    await places.set_health(gpu=event.gpu_uuid, node=event.node, health=event.health)
    if event.health not in OUT_OF_SERVICE:
        return
    fx = _effects(ctx.deps, ctx.deps.clock())
    for incident in await IncidentStore(ctx.uow.conn).open_in_state(event.node, IncidentState.DRAINING):
        if drains_node(incident) or incident.gpu == event.gpu_uuid:
            await _drain_done(ctx.uow, incident, deps=ctx.deps, gpu=event.gpu_uuid, fx=fx)
    if await _open_drains(ctx.uow, node=event.node, gpus={event.gpu_uuid}):
        return
    # No open incident holds the GPU: one escalated before its drain took effect may have.
    on_it = await places.on_gpu(event.gpu_uuid)
    await _move_strays(
        ctx.uow, node=event.node, gpus={event.gpu_uuid}, placements=on_it, fx=fx, skip_asked=True
    )


async def _drain_done(
    uow: UnitOfWork, incident: Incident, *, deps: RecoveryDeps, gpu: str, fx: Effects
) -> None:
    """The drain holds: every workload now on the GPU (or node) joins the incident and is moved."""
    places = deps.placements(uow)
    on_it = await places.on_node(incident.node) if drains_node(incident) else await places.on_gpu(gpu)
    adopted = adopt_workloads(incident, workload_ids=[p.workload_id for p in on_it], at=fx.now)
    await apply(uow, drain_completed(adopted.incident, at=fx.now), before=incident, fx=fx)


async def _open_drains(uow: UnitOfWork, *, node: str, gpus: set[str]) -> list[Incident]:
    """Open incidents holding one of these GPUs (or their node) drained, oldest first (locked)."""
    found = await IncidentStore(uow.conn).open_in_state(node, *HOLDING_STATES)
    return [i for i in found if requested_drain(i) and (drains_node(i) or i.gpu in gpus)]


async def _move_strays(
    uow: UnitOfWork,
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
    for incident in await IncidentStore(uow.conn).escalated_on_node(node):
        if leaves_out_of_service(incident) and (drains_node(incident) or incident.gpu in gpus):
            asked = {m.workload_id for m in incident.migrations} if skip_asked else set()
            strays = [p.workload_id for p in placements if p.workload_id not in asked]
            await apply(uow, move_strays(incident, workload_ids=strays), before=incident, fx=fx)
            return


async def on_migration_step(event: MigrationStepV1, ctx: HandlerContext[RecoveryDeps]) -> None:
    fx = _effects(ctx.deps, ctx.deps.clock())
    phase = MigrationPhase(event.phase)
    for incident in await IncidentStore(ctx.uow.conn).migrating_for(event.workload_id):
        moved = record_progress(
            incident, workload_id=event.workload_id, phase=phase, percent=event.percent, at=fx.now
        )
        step = next((m for m in moved.incident.migrations if m.workload_id == event.workload_id), None)
        await apply(ctx.uow, moved, before=incident, fx=fx, progress=step)


async def on_workload_placed(event: WorkloadPlacedV1, ctx: HandlerContext[RecoveryDeps]) -> None:
    places = ctx.deps.placements(ctx.uow)
    placement = Placement(
        workload_id=event.workload_id,
        tenant_id=event.tenant_id,
        placement_id=event.placement_id,
        node=event.node,
        gpus=tuple(a.gpu_uuid for a in event.allocations),
    )
    await places.place(placement, priority=event.priority)
    fx, gpus = _effects(ctx.deps, ctx.deps.clock()), set(placement.gpus)
    holding = await _open_drains(ctx.uow, node=placement.node, gpus=gpus)
    for incident in holding:
        # A placement onto a GPU an open incident is taking out of service must move again.
        moved = adopt_workloads(incident, workload_ids=[placement.workload_id], at=fx.now)
        await apply(ctx.uow, moved, before=incident, fx=fx)
    if holding:
        return
    health = await places.health_of(placement.gpus)
    out = {gpu for gpu, h in health.items() if h in OUT_OF_SERVICE}
    if out:
        # Placed before the scheduler saw the drain, and heard of only after the incident closed.
        await _move_strays(ctx.uow, node=placement.node, gpus=out, placements=[placement], fx=fx)


async def on_workload_ended(event: WorkloadEndedV1, ctx: HandlerContext[RecoveryDeps]) -> None:
    await ctx.deps.placements(ctx.uow).end(workload_id=event.workload_id, placement_id=event.placement_id)


def handlers(deps: RecoveryDeps) -> Handlers[RecoveryDeps]:
    """The main consumer's handlers: faults and alerts, GPU health, migration steps and placements."""
    return (
        Handlers(deps)
        .on(FaultSignaledV1, on_fault_signaled)
        .on(AlertFiredV1, on_alert_fired)
        .on(GpuHealthChangedV1, on_gpu_health_changed)
        .on(MigrationStepV1, on_migration_step)
        .on(WorkloadPlacedV1, on_workload_placed)
        .on(WorkloadEndedV1, on_workload_ended)
    )
