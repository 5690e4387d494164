"""Events that become alerts: faults, budget thresholds, escalated incidents.

Handlers only queue a `Signal` row inside the consumer's inbox transaction (a redelivered event is a
no-op); the evaluator, the single writer of alert state, applies the signals on its next tick.
"""

from __future__ import annotations

from typing import TypeAlias

from libs.common.bus.handlers import HandlerContext, Handlers
from libs.common.events.billing import BudgetThresholdCrossedV1
from libs.common.events.recovery import IncidentClosedV1
from libs.common.events.telemetry import FaultSignaledV1
from services.alerting.adapters.unit_of_work import PostgresAlertingUnitOfWork
from services.alerting.domain.signals import budget_signal, escalation_signal, fault_signal
from services.alerting.service.unit_of_work import AlertingUnitOfWork

__all__ = [
    "Context",
    "handlers",
    "on_budget_threshold_crossed",
    "on_fault_signaled",
    "on_incident_closed",
]


#: What every handler of alerting gets: no deps, alerting's unit of work.
Context: TypeAlias = HandlerContext[None, AlertingUnitOfWork]


async def on_fault_signaled(event: FaultSignaledV1, ctx: Context) -> None:
    signal = fault_signal(
        kind=event.kind,
        node=event.node,
        gpu=event.gpu_uuid,
        xid=event.xid,
        at=event.at,
        evidence=event.evidence,
    )
    await ctx.uow.signals.queue_signal(signal)


async def on_budget_threshold_crossed(event: BudgetThresholdCrossedV1, ctx: Context) -> None:
    signal = budget_signal(
        tenant=event.tenant_id,
        project=event.project,
        month=event.month,
        threshold_pct=event.threshold_pct,
        hard_stop=event.hard_stop,
        at=ctx.envelope.time,
    )
    await ctx.uow.signals.queue_signal(signal)


async def on_incident_closed(event: IncidentClosedV1, ctx: Context) -> None:
    if event.outcome != "escalated":
        return
    signal = escalation_signal(incident=event.incident_id, reason=event.reason, at=ctx.envelope.time)
    await ctx.uow.signals.queue_signal(signal)


def handlers() -> Handlers[None, PostgresAlertingUnitOfWork]:
    """The signals consumer's handlers: faults, budget thresholds and escalated incidents."""
    return (
        Handlers(None, uow=PostgresAlertingUnitOfWork)
        .on(FaultSignaledV1, on_fault_signaled)
        .on(BudgetThresholdCrossedV1, on_budget_threshold_crossed)
        .on(IncidentClosedV1, on_incident_closed)
    )
