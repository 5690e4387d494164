"""SLA credits inside one unit of work: decide each incident move once, when billing knows all of it.

The pieces arrive on three topics in any order: the incident (recovery.events), the move that names it
(WorkloadMigratingV1) and the new placement running (WorkloadRunningV1). Each of them calls ``settle``;
the one that completes the picture decides, and the decision (credited or not, and why) is kept once per
(incident, workload) with its ledger entry in the same transaction.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta

from services.billing.domain.sla import (
    SlaPolicy,
    WorkloadMove,
    credit_record,
    decide_credit,
    lost_value,
    month_bounds,
)
from services.billing.service.metering import post
from services.billing.service.unit_of_work import BillingUnitOfWork

__all__ = ["settle"]


async def settle(
    uow: BillingUnitOfWork, moves: Iterable[WorkloadMove], *, default_policy: SlaPolicy, interval: timedelta
) -> None:
    """Decide the credit of each incident move whose incident is known and whose new placement runs."""
    for move in moves:
        await _settle_one(uow, move, default_policy=default_policy, interval=interval)


async def _settle_one(
    uow: BillingUnitOfWork, move: WorkloadMove, *, default_policy: SlaPolicy, interval: timedelta
) -> None:
    sla = uow.sla
    if move.incident_id is None or await sla.decision(move.incident_id, move.workload_id) is not None:
        return
    incident = await sla.incident(move.incident_id)
    running = [r for r in await uow.allocations.lock_placement(move.to_placement_id) if r.running]
    left = await uow.allocations.lock_placement(move.from_placement_id)
    if incident is None or not running or not left:
        return  # not all known yet: a later event settles it
    running_at = running[0].allocation.started_at
    charged = [r.allocation for r in left if r.running]
    prices = await uow.prices.price_list()
    start, end = month_bounds(running_at)
    decision = decide_credit(
        policy=await sla.policy(move.tenant_id) or default_policy,
        incident=incident,
        move=move,
        project=left[0].allocation.project,
        running_at=running_at,
        running_event_id=running[0].running_event_id or move.event_id,
        lost_micro=lost_value(
            charged, start=incident.detected_at, end=running_at, prices=prices, interval=interval
        ),
        credited_this_month_micro=await sla.credited_between(move.tenant_id, start=start, end=end),
    )
    if not await sla.record_decision(decision) or decision.amount_micro == 0:
        return
    allocation = charged[0]
    price = prices.price_at(
        resource=allocation.resource,
        pricing_class=allocation.pricing_class,
        at=max(incident.detected_at, allocation.started_at),
    )
    record = credit_record(
        decision,
        allocation=allocation,
        price_id=price.price_id,
        micro_per_hour=price.micro_per_hour,
        basis=price.basis.value,
    )
    await post(uow, [record])
