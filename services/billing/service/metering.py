"""Metering inside one unit of work: open, accrue and close allocations, post charges, evaluate budgets.

A placement's allocations are held from its placement, but charged only from the host's running fact
(``WorkloadRunningV1.started_at``) to its end fact (``WorkloadEndedV1.ended_at``, the host's exit or the
scheduler's cancel or preemption). Times are the facts' own, never the wall clock, except for accrual
which rates running allocations up to now. A workload that moves stops being charged where it was at the
instant it runs on its new placement (or ends there without running), so a move leaves no gap and no
overlap. An end that lands before what accrual already rated reverses the overrun and re-rates the final
partial period, so the ledger always equals usage recomputed from the facts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from libs.common.events.billing import BudgetThresholdCrossedV1
from services.billing.adapters.allocation_store import AllocationRow
from services.billing.domain.budgets import BudgetState, apply_charge, month_of
from services.billing.domain.entry_records import EntryRecord, record_for_reversal, records_for_charges
from services.billing.domain.placements import Placement, allocations_for
from services.billing.domain.prices import PriceList
from services.billing.domain.rating import EndReason, close, floor_to_grid, rate
from services.billing.service.metrics import count_posted
from services.billing.service.unit_of_work import BillingUnitOfWork

__all__ = ["MeteringConfig", "accrue", "close_placement", "open_placement", "post", "start_placement"]


@dataclass(frozen=True, slots=True, kw_only=True)
class MeteringConfig:
    """The charge grid and how far one accrual pass may rate one allocation."""

    interval: timedelta = timedelta(minutes=1)
    max_span: timedelta = timedelta(hours=24)
    batch: int = 200


async def open_placement(
    uow: BillingUnitOfWork,
    *,
    placement: Placement,
    kind: str,
    at: datetime,
    event_id: str,
    config: MeteringConfig,
) -> None:
    """Hold the placement's allocations from `at`, charging nothing until the host runs it; apply the
    running and end facts that came before it."""
    store, placement_id = uow.allocations, placement.placement_id
    await store.record_fact(event_id=event_id, kind="placed", placement_id=placement_id, at=at)
    prices = await uow.prices.price_list()
    for allocation in allocations_for(placement=placement, prices=prices, at=at):
        await store.open_allocation(allocation=allocation, placement_id=placement_id, kind=kind)
    early_run = await store.first_running(placement_id)
    if early_run is not None:
        await _start(
            uow,
            workload_id=placement.workload_id,
            placement_id=placement_id,
            at=early_run,
            event_id=event_id,
            config=config,
        )
    early_end = await store.first_end(placement_id)
    if early_end is not None:
        at_end, reason = early_end
        end_event = await store.first_end_event(placement_id) or event_id
        await _close_rows(uow, placement_id, at=at_end, reason=reason, event_id=end_event, config=config)


async def start_placement(
    uow: BillingUnitOfWork,
    *,
    workload_id: str,
    placement_id: str,
    at: datetime,
    event_id: str,
    config: MeteringConfig,
) -> None:
    """Charge a placement from `at`, when its host runs it (once); the placement a workload moved away
    from is closed at that same instant."""
    await uow.allocations.record_fact(event_id=event_id, kind="running", placement_id=placement_id, at=at)
    await _start(
        uow, workload_id=workload_id, placement_id=placement_id, at=at, event_id=event_id, config=config
    )


async def close_placement(
    uow: BillingUnitOfWork,
    *,
    workload_id: str,
    placement_id: str,
    at: datetime,
    reason: EndReason,
    event_id: str,
    config: MeteringConfig,
) -> None:
    """Close a placement's open allocations at `at`, rating the final partial period in this transaction
    (nothing when it never ran); a placement the workload moved away from ends there too."""
    store = uow.allocations
    await store.record_fact(
        event_id=event_id, kind="ended", placement_id=placement_id, at=at, end_reason=reason
    )
    await _close_rows(uow, placement_id, at=at, reason=reason, event_id=event_id, config=config)
    await _close_left(
        uow, workload_id=workload_id, keep=placement_id, at=at, event_id=event_id, config=config
    )


async def accrue(uow: BillingUnitOfWork, *, now: datetime, config: MeteringConfig) -> int:
    """Rate one batch of open allocations up to the last grid tick; returns how many were rated."""
    store = uow.allocations
    rows = await store.lock_due(before=floor_to_grid(now, interval=config.interval), limit=config.batch)
    if not rows:
        return 0
    prices = await uow.prices.price_list()
    records: list[EntryRecord] = []
    for row in rows:
        target = min(now, row.rated_until + config.max_span)
        rating = rate(
            allocation=row.allocation,
            rated_until=row.rated_until,
            now=target,
            prices=prices,
            interval=config.interval,
        )
        records.extend(records_for_charges(rating.lines, opened_by=row.running_event_id))
        await store.set_rated(row.allocation.allocation_id, rating.rated_until)
    await post(uow, records)
    return len(rows)


async def post(uow: BillingUnitOfWork, records: Sequence[EntryRecord]) -> list[EntryRecord]:
    """Post entries (new ones only) and evaluate the budgets of the projects they touch; the new ones
    are counted in the metrics once the transaction commits (a repeat was never new: it counts nothing)."""
    fresh = await uow.ledger.post(records)
    if fresh:
        uow.after_commit(lambda: count_posted(fresh))
    groups: dict[tuple[str, str], list[EntryRecord]] = {}
    for record in fresh:
        groups.setdefault((record.entry.tenant_id, record.entry.project), []).append(record)
    for (tenant_id, project), group in groups.items():
        await _evaluate_budget(uow, tenant_id=tenant_id, project=project, records=group)
    return fresh


async def _start(
    uow: BillingUnitOfWork,
    *,
    workload_id: str,
    placement_id: str,
    at: datetime,
    event_id: str,
    config: MeteringConfig,
) -> None:
    if not await uow.allocations.start_placement(placement_id, at=at):
        return  # runs already, has ended, or is not placed yet (its placed event starts it then)
    await _close_left(
        uow, workload_id=workload_id, keep=placement_id, at=at, event_id=event_id, config=config
    )


async def _close_left(
    uow: BillingUnitOfWork,
    *,
    workload_id: str,
    keep: str,
    at: datetime,
    event_id: str,
    config: MeteringConfig,
) -> None:
    """Close at `at` every other open placement of the workload held since before `at`: those it moved
    away from (a workload runs in one place at a time). One instant ends the one and starts the other."""
    rows = await uow.allocations.lock_open_of_workload(workload_id)
    left = sorted({r.placement_id for r in rows if r.placement_id != keep and r.allocation.started_at <= at})
    for placement_id in left:
        await uow.allocations.record_fact(
            event_id=event_id, kind="ended", placement_id=placement_id, at=at, end_reason=EndReason.MIGRATED
        )
        await _close_rows(
            uow, placement_id, at=at, reason=EndReason.MIGRATED, event_id=event_id, config=config
        )


async def _close_rows(
    uow: BillingUnitOfWork,
    placement_id: str,
    *,
    at: datetime,
    reason: EndReason,
    event_id: str,
    config: MeteringConfig,
) -> None:
    """Close a placement's open allocations at `at`, ended by the event `event_id`."""
    store = uow.allocations
    rows = [r for r in await store.lock_placement(placement_id) if r.open]
    if not rows:
        return
    prices = await uow.prices.price_list()
    records: list[EntryRecord] = []
    for row in rows:
        if not row.running:  # held but never run: closed, nothing owed
            end = max(at, row.allocation.started_at)
            closed = close(row.allocation, at=end, reason=reason)
            await store.close(closed, rated_until=end, ended_event_id=event_id)
            continue
        records.extend(
            await _final_records(
                uow, row, at=at, reason=reason, event_id=event_id, prices=prices, config=config
            )
        )
    await post(uow, records)


async def _final_records(
    uow: BillingUnitOfWork,
    row: AllocationRow,
    *,
    at: datetime,
    reason: EndReason,
    event_id: str,
    prices: PriceList,
    config: MeteringConfig,
) -> list[EntryRecord]:
    allocation = row.allocation
    end = max(at, allocation.started_at)
    records: list[EntryRecord] = []
    lower = row.rated_until
    if lower > end:  # accrual ran past the end: undo those charges, then rate up to the end
        overrun = await uow.ledger.live_charges_after(allocation.allocation_id, end)
        records.extend(
            record_for_reversal(r, reason=f"charged past the {reason.value} end", at=end, closed_by=event_id)
            for r in overrun
        )
        lower = min((r.period_start for r in overrun), default=end)
    closed = close(allocation, at=end, reason=reason)
    rating = rate(allocation=closed, rated_until=lower, now=end, prices=prices, interval=config.interval)
    records.extend(records_for_charges(rating.lines, opened_by=row.running_event_id, closed_by=event_id))
    await uow.allocations.close(closed, rated_until=end, ended_event_id=event_id)
    return records


async def _evaluate_budget(
    uow: BillingUnitOfWork, *, tenant_id: str, project: str, records: list[EntryRecord]
) -> None:
    budgets = uow.budgets
    budget = await budgets.budget(tenant_id, project)
    states: dict[str, BudgetState] = {}
    for record in records:
        month = month_of(record.entry.at)
        state = states.get(month) or await budgets.state(tenant_id, project, month)
        if budget is None:
            states[month] = BudgetState(
                month=month, spent_micro=state.spent_micro + record.amount_micro, crossed=state.crossed
            )
            continue
        decision = apply_charge(
            budget=budget, state=state, amount_micro=record.amount_micro, at=record.entry.at
        )
        states[month] = decision.state
        for threshold in decision.newly_crossed:
            # One charge can cross several thresholds: the stop rides on the highest, so the scheduler's
            # refusal names the threshold that stopped the project (100 %), not the first one passed.
            stops = decision.hard_stop and threshold == decision.newly_crossed[-1]
            event = BudgetThresholdCrossedV1(
                tenant_id=tenant_id,
                project=project,
                month=month,
                threshold_pct=threshold,
                spend_micros=decision.state.spent_micro,
                budget_micros=budget.limit_micro,
                hard_stop=stops,
            )
            await uow.emit(event, tenant=tenant_id)
    for state in states.values():
        await budgets.save_state(tenant_id, project, state)
