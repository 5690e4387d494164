"""Events that become alerts: faults, budget thresholds, escalated incidents.

Handlers only queue a `Signal` row inside the consumer's inbox transaction (a redelivered event is a
no-op); the evaluator, the single writer of alert state, applies the signals on its next tick.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from libs.common.bus.handlers import HandlerContext, Handlers
from libs.common.db.uow import UnitOfWork
from libs.common.events.billing import BudgetThresholdCrossedV1
from libs.common.events.recovery import IncidentClosedV1
from libs.common.events.telemetry import FaultSignaledV1
from services.alerting.adapters.engine_state_store import StateStore
from services.alerting.domain.signals import Signal, budget_signal, escalation_signal, fault_signal

__all__ = [
    "AlertingDeps",
    "SignalQueue",
    "handlers",
    "on_budget_threshold_crossed",
    "on_fault_signaled",
    "on_incident_closed",
]


class SignalQueue(Protocol):
    """Where the handlers queue signals for the evaluator (StateStore; FakeStateStore in unit tests)."""

    async def queue_signal(self, signal: Signal) -> None: ...


def _sql_signals(uow: UnitOfWork) -> SignalQueue:
    return StateStore(uow.conn)


@dataclass(frozen=True, slots=True, kw_only=True)
class AlertingDeps:
    """What the handlers need besides the unit of work: the signal queue of a unit of work."""

    signals: Callable[[UnitOfWork], SignalQueue] = _sql_signals


async def on_fault_signaled(event: FaultSignaledV1, ctx: HandlerContext[AlertingDeps]) -> None:
    signal = fault_signal(
        kind=event.kind,
        node=event.node,
        gpu=event.gpu_uuid,
        xid=event.xid,
        at=event.at,
        evidence=event.evidence,
    )
    await ctx.deps.signals(ctx.uow).queue_signal(signal)


async def on_budget_threshold_crossed(
    event: BudgetThresholdCrossedV1, ctx: HandlerContext[AlertingDeps]
) -> None:
    signal = budget_signal(
        tenant=event.tenant_id,
        project=event.project,
        month=event.month,
        threshold_pct=event.threshold_pct,
        hard_stop=event.hard_stop,
        at=ctx.envelope.time,
    )
    await ctx.deps.signals(ctx.uow).queue_signal(signal)


async def on_incident_closed(event: IncidentClosedV1, ctx: HandlerContext[AlertingDeps]) -> None:
    if event.outcome != "escalated":
        return
    signal = escalation_signal(incident=event.incident_id, reason=event.reason, at=ctx.envelope.time)
    await ctx.deps.signals(ctx.uow).queue_signal(signal)


def handlers(deps: AlertingDeps) -> Handlers[AlertingDeps]:
    """The signals consumer's handlers: faults, budget thresholds and escalated incidents."""
    return (
        Handlers(deps)
        .on(FaultSignaledV1, on_fault_signaled)
        .on(BudgetThresholdCrossedV1, on_budget_threshold_crossed)
        .on(IncidentClosedV1, on_incident_closed)
    )
