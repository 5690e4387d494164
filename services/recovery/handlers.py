"""Event handlers: faults open or fold incidents; drains, migration steps and placements move them on."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from libs.common.bus.consumer import Handler, HandlerContext
from libs.common.db.uow import UnitOfWork
from libs.common.events import Event
from libs.common.events.agent import MigrationStepV1
from libs.common.events.alerting import AlertFiredV1
from libs.common.events.inventory import GpuHealthChangedV1
from libs.common.events.scheduler import WorkloadEndedV1, WorkloadPlacedV1
from libs.common.events.telemetry import FaultSignaledV1
from services.recovery import metrics
from services.recovery.catalog import Action, FaultCatalog
from services.recovery.classify import FaultSignal, classify
from services.recovery.correlate import CorrelationThresholds, Diagnosis, FaultContext, diagnose
from services.recovery.detection import DetectionOutcome, ingest_signal
from services.recovery.effects import Effects, apply
from services.recovery.incidents import (
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
from services.recovery.migrations import MigrationPhase
from services.recovery.settings import RecoverySettings
from services.recovery.signals import from_alert, from_fault
from services.recovery.store import IncidentStore, Placement, PlacementStore
from services.recovery.window import SampleWindow

__all__ = ["RecoveryHandlers"]


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class RecoveryHandlers:
    """The consumer's handlers, bound to the catalog, settings and telemetry window they need."""

    settings: RecoverySettings
    catalog: FaultCatalog
    window: SampleWindow | None = None
    clock: Callable[[], datetime] = field(default=_utcnow)

    def mapping(self) -> Mapping[type[Event], Handler]:
        """Event class → handler, for the ConsumerSpec."""
        return {
            FaultSignaledV1: self.handle_fault,
            AlertFiredV1: self.handle_alert,
            GpuHealthChangedV1: self.handle_gpu_health,
            MigrationStepV1: self.handle_migration_step,
            WorkloadPlacedV1: self.handle_workload_placed,
            WorkloadEndedV1: self.handle_workload_ended,
        }

    def _effects(self, now: datetime) -> Effects:
        return Effects(settle=self.settings.settle_timedelta, now=now)

    async def handle_fault(self, event: FaultSignaledV1, ctx: HandlerContext) -> None:
        await self.ingest(from_fault(event), uow=ctx.uow)

    async def handle_alert(self, event: AlertFiredV1, ctx: HandlerContext) -> None:
        signal = from_alert(event)
        if signal is not None:
            await self.ingest(signal, uow=ctx.uow)

    async def ingest(self, signal: FaultSignal, *, uow: UnitOfWork) -> None:
        """Classify a signal, fold it or open an incident, and start remediating a new one."""
        now = self.clock()
        incidents, places = IncidentStore(uow.conn), PlacementStore(uow.conn)
        recent = await incidents.recent_on_node(signal.node, since=now - self.settings.policy.fold_window)
        classification = classify(signal, catalog=self.catalog)
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
            policy=self.settings.policy,
        )
        metrics.SIGNALS.labels(detection.outcome.value).inc()
        fx = self._effects(now)
        if detection.outcome is DetectionOutcome.OPENED and detection.incident is not None:
            await self._open(uow, detection.incident, recent=recent, node_placed=node_placed, fx=fx)
        elif detection.outcome is DetectionOutcome.FOLDED and detection.incident is not None:
            folded = detection.incident
            before = next(i for i in recent if i.id == folded.id)
            await apply(uow, Transition(incident=folded), before=before, fx=fx)
            recent = [folded if i.id == folded.id else i for i in recent]
        await self._fail_health_checks(uow, recent, signal=signal, fx=fx)

    async def _open(
        self,
        uow: UnitOfWork,
        incident: Incident,
        *,
        recent: Sequence[Incident],
        node_placed: Sequence[Placement],
        fx: Effects,
    ) -> None:
        first = start_diagnosis(incident, at=fx.now)
        diagnosis = await self._diagnose(first.incident, recent=recent)
        second = start_remediation(
            first.incident,
            diagnosis=diagnosis,
            at=fx.now,
            node_workload_ids=[p.workload_id for p in node_placed],
        )
        both = Transition(incident=second.incident, commands=first.commands + second.commands)
        await apply(uow, both, before=None, fx=fx)
        if both.incident.gpu is not None:
            health = await PlacementStore(uow.conn).health_of([both.incident.gpu])
            if drain_in_effect(both.incident, gpu_health=health.get(both.incident.gpu)):
                # Inventory will report no change for this drain: it is complete already.
                await self._drain_done(uow, both.incident, gpu=both.incident.gpu, fx=fx)

    async def _diagnose(self, incident: Incident, *, recent: Sequence[Incident]) -> Diagnosis:
        at = incident.fault_at
        own, peers = [], []
        if self.window is not None:
            if incident.gpu is not None:
                own = await self.window.samples(incident.gpu, until=at)
            peers = await self.window.peers(incident.node, exclude=incident.gpu, until=at)
        context = FaultContext(
            gpu=incident.gpu, node=incident.node, workload_ids=incident.workload_ids, at=at
        )
        limits = CorrelationThresholds(
            recent_fault_window=timedelta(seconds=self.settings.correlation_window_s)
        )
        return diagnose(
            fault=context,
            limits=limits,
            own_samples=own,
            peer_samples=peers,
            recent_faults=[i.as_recent_fault() for i in recent if i.id != incident.id],
        )

    async def _fail_health_checks(
        self, uow: UnitOfWork, recent: Sequence[Incident], *, signal: FaultSignal, fx: Effects
    ) -> None:
        """A new fault where an incident awaits its health check means the check failed."""
        for incident in recent:
            if incident.state is not IncidentState.VERIFYING:
                continue
            if signal.gpu is None or incident.gpu == signal.gpu or drains_node(incident):
                failed = record_health_check(incident, passed=False, at=fx.now)
                await apply(uow, failed, before=incident, fx=fx)

    async def handle_gpu_health(self, event: GpuHealthChangedV1, ctx: HandlerContext) -> None:
        places, incidents = PlacementStore(ctx.uow.conn), IncidentStore(ctx.uow.conn)
        await places.set_health(gpu=event.gpu_uuid, node=event.node, health=event.health)
        if event.health not in OUT_OF_SERVICE:
            return
        fx = self._effects(self.clock())
        for incident in await incidents.open_in_state(event.node, IncidentState.DRAINING):
            if drains_node(incident) or incident.gpu == event.gpu_uuid:
                await self._drain_done(ctx.uow, incident, gpu=event.gpu_uuid, fx=fx)
        if await self._open_drains(ctx.uow, node=event.node, gpus={event.gpu_uuid}):
            return
        # No open incident holds the GPU: one escalated before its drain took effect may have.
        on_it = await places.on_gpu(event.gpu_uuid)
        await self._move_strays(
            ctx.uow, node=event.node, gpus={event.gpu_uuid}, placements=on_it, fx=fx, skip_asked=True
        )

    async def _drain_done(self, uow: UnitOfWork, incident: Incident, *, gpu: str, fx: Effects) -> None:
        """The drain holds: every workload now on the GPU (or node) joins the incident and is moved."""
        places = PlacementStore(uow.conn)
        on_it = await places.on_node(incident.node) if drains_node(incident) else await places.on_gpu(gpu)
        adopted = adopt_workloads(incident, workload_ids=[p.workload_id for p in on_it], at=fx.now)
        await apply(uow, drain_completed(adopted.incident, at=fx.now), before=incident, fx=fx)

    async def _open_drains(self, uow: UnitOfWork, *, node: str, gpus: set[str]) -> list[Incident]:
        """Open incidents holding one of these GPUs (or their node) drained, oldest first (locked)."""
        found = await IncidentStore(uow.conn).open_in_state(node, *HOLDING_STATES)
        return [i for i in found if requested_drain(i) and (drains_node(i) or i.gpu in gpus)]

    async def _move_strays(
        self,
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

    async def handle_migration_step(self, event: MigrationStepV1, ctx: HandlerContext) -> None:
        fx = self._effects(self.clock())
        phase = MigrationPhase(event.phase)
        for incident in await IncidentStore(ctx.uow.conn).migrating_for(event.workload_id):
            moved = record_progress(
                incident, workload_id=event.workload_id, phase=phase, percent=event.percent, at=fx.now
            )
            step = next((m for m in moved.incident.migrations if m.workload_id == event.workload_id), None)
            await apply(ctx.uow, moved, before=incident, fx=fx, progress=step)

    async def handle_workload_placed(self, event: WorkloadPlacedV1, ctx: HandlerContext) -> None:
        places = PlacementStore(ctx.uow.conn)
        placement = Placement(
            workload_id=event.workload_id,
            tenant_id=event.tenant_id,
            placement_id=event.placement_id,
            node=event.node,
            gpus=tuple(a.gpu_uuid for a in event.allocations),
        )
        await places.place(placement, priority=event.priority)
        fx, gpus = self._effects(self.clock()), set(placement.gpus)
        holding = await self._open_drains(ctx.uow, node=placement.node, gpus=gpus)
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
            await self._move_strays(ctx.uow, node=placement.node, gpus=out, placements=[placement], fx=fx)

    async def handle_workload_ended(self, event: WorkloadEndedV1, ctx: HandlerContext) -> None:
        await PlacementStore(ctx.uow.conn).end(workload_id=event.workload_id, placement_id=event.placement_id)
