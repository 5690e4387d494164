"""Events that become alerts: faults, budget thresholds, escalated incidents.

Handlers only queue a `Signal` row inside the consumer's inbox transaction (a redelivered event is a
no-op); the evaluator, the single writer of alert state, applies the signals on its next tick.
"""

from __future__ import annotations

from collections.abc import Mapping

from libs.common.bus.consumer import Handler, HandlerContext
from libs.common.events import Event
from libs.common.events.billing import BudgetThresholdCrossedV1
from libs.common.events.recovery import IncidentClosedV1
from libs.common.events.telemetry import FaultSignaledV1
from services.alerting.signals import budget_signal, escalation_signal, fault_signal
from services.alerting.statestore import StateStore

__all__ = ["HANDLERS", "handle_budget_threshold_crossed", "handle_fault_signaled", "handle_incident_closed"]


async def handle_fault_signaled(event: FaultSignaledV1, ctx: HandlerContext) -> None:
    signal = fault_signal(
        kind=event.kind,
        node=event.node,
        gpu=event.gpu_uuid,
        xid=event.xid,
        at=event.at,
        evidence=event.evidence,
    )
    await StateStore(ctx.uow.conn).queue_signal(signal)


async def handle_budget_threshold_crossed(event: BudgetThresholdCrossedV1, ctx: HandlerContext) -> None:
    signal = budget_signal(
        tenant=event.tenant_id,
        project=event.project,
        month=event.month,
        threshold_pct=event.threshold_pct,
        hard_stop=event.hard_stop,
        at=ctx.envelope.time,
    )
    await StateStore(ctx.uow.conn).queue_signal(signal)


async def handle_incident_closed(event: IncidentClosedV1, ctx: HandlerContext) -> None:
    if event.outcome != "escalated":
        return
    signal = escalation_signal(incident=event.incident_id, reason=event.reason, at=ctx.envelope.time)
    await StateStore(ctx.uow.conn).queue_signal(signal)


HANDLERS: Mapping[type[Event], Handler] = {
    FaultSignaledV1: handle_fault_signaled,
    BudgetThresholdCrossedV1: handle_budget_threshold_crossed,
    IncidentClosedV1: handle_incident_closed,
}
