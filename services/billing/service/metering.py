"""Metering inside one unit of work: open, accrue and close allocations, post charges, evaluate budgets.

Charging runs from the placement (when GPUs are held) to the end fact. Times are the facts' own
(the envelope time), never the wall clock, except for accrual which rates open allocations up to now.
An end that lands before what accrual already rated reverses the overrun and re-rates the final
partial period, so the ledger always equals usage recomputed from the facts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from libs.common.db.uow import UnitOfWork
from libs.common.events.billing import BudgetThresholdCrossedV1
from services.billing.adapters.allocation_store import AllocationRow, AllocationStore
from services.billing.adapters.budget_store import BudgetStore
from services.billing.adapters.ledger_store import LedgerStore
from services.billing.adapters.price_store import PriceStore
from services.billing.domain.budgets import BudgetState, apply_charge, month_of
from services.billing.domain.entry_records import EntryRecord, record_for_reversal, records_for_charges
from services.billing.domain.placements import Placement, allocations_for
from services.billing.domain.prices import PriceList
from services.billing.domain.rating import EndReason, close, floor_to_grid, rate

__all__ = ["MeteringConfig", "accrue", "close_placement", "open_placement", "post"]


@dataclass(frozen=True, slots=True, kw_only=True)
class MeteringConfig:
    """The charge grid and how far one accrual pass may rate one allocation."""

    interval: timedelta = timedelta(minutes=1)
    max_span: timedelta = timedelta(hours=24)
    batch: int = 200


async def open_placement(
    uow: UnitOfWork, *, placement: Placement, kind: str, at: datetime, event_id: str, config: MeteringConfig
) -> None:
    """Open the placement's allocations at `at` (nothing rated yet); close them if its end came first."""
    store = AllocationStore(uow.conn)
    await store.record_fact(event_id=event_id, kind="placed", placement_id=placement.placement_id, at=at)
    prices = await PriceStore(uow.conn).price_list()
    for allocation in allocations_for(placement=placement, prices=prices, at=at):
        await store.open_allocation(allocation=allocation, placement_id=placement.placement_id, kind=kind)
    early_end = await store.first_end(placement.placement_id)
    if early_end is not None:
        await _close_rows(uow, placement.placement_id, at=early_end[0], reason=early_end[1], config=config)


async def close_placement(
    uow: UnitOfWork,
    *,
    placement_id: str,
    at: datetime,
    reason: EndReason,
    event_id: str,
    config: MeteringConfig,
) -> None:
    """Close a placement's open allocations at `at`, rating the final partial period in this transaction."""
    store = AllocationStore(uow.conn)
    await store.record_fact(
        event_id=event_id, kind="ended", placement_id=placement_id, at=at, end_reason=reason
    )
    await _close_rows(uow, placement_id, at=at, reason=reason, config=config)


async def accrue(uow: UnitOfWork, *, now: datetime, config: MeteringConfig) -> int:
    """Rate one batch of open allocations up to the last grid tick; returns how many were rated."""
    store = AllocationStore(uow.conn)
    rows = await store.lock_due(before=floor_to_grid(now, interval=config.interval), limit=config.batch)
    if not rows:
        return 0
    prices = await PriceStore(uow.conn).price_list()
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
        records.extend(records_for_charges(rating.lines))
        await store.set_rated(row.allocation.allocation_id, rating.rated_until)
    await post(uow, records)
    return len(rows)


async def post(uow: UnitOfWork, records: Sequence[EntryRecord]) -> list[EntryRecord]:
    """Post entries (new ones only) and evaluate the budgets of the projects they touch."""
    fresh = await LedgerStore(uow.conn).post(records)
    groups: dict[tuple[str, str], list[EntryRecord]] = {}
    for record in fresh:
        groups.setdefault((record.entry.tenant_id, record.entry.project), []).append(record)
    for (tenant_id, project), group in groups.items():
        await _evaluate_budget(uow, tenant_id=tenant_id, project=project, records=group)
    return fresh


async def _close_rows(
    uow: UnitOfWork, placement_id: str, *, at: datetime, reason: EndReason, config: MeteringConfig
) -> None:
    store = AllocationStore(uow.conn)
    rows = [r for r in await store.lock_placement(placement_id) if r.open]
    if not rows:
        return
    prices = await PriceStore(uow.conn).price_list()
    records: list[EntryRecord] = []
    for row in rows:
        records.extend(await _final_records(uow, row, at=at, reason=reason, prices=prices, config=config))
    await post(uow, records)


async def _final_records(
    uow: UnitOfWork,
    row: AllocationRow,
    *,
    at: datetime,
    reason: EndReason,
    prices: PriceList,
    config: MeteringConfig,
) -> list[EntryRecord]:
    allocation = row.allocation
    end = max(at, allocation.started_at)
    records: list[EntryRecord] = []
    lower = row.rated_until
    if lower > end:  # accrual ran past the end: undo those charges, then rate up to the end
        overrun = await LedgerStore(uow.conn).live_charges_after(allocation.allocation_id, end)
        records.extend(
            record_for_reversal(r, reason=f"charged past the {reason.value} end", at=end) for r in overrun
        )
        lower = min((r.period_start for r in overrun), default=end)
    closed = close(allocation, at=end, reason=reason)
    rating = rate(allocation=closed, rated_until=lower, now=end, prices=prices, interval=config.interval)
    records.extend(records_for_charges(rating.lines))
    await AllocationStore(uow.conn).close(closed, rated_until=end)
    return records


async def _evaluate_budget(
    uow: UnitOfWork, *, tenant_id: str, project: str, records: list[EntryRecord]
) -> None:
    budgets = BudgetStore(uow.conn)
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
            event = BudgetThresholdCrossedV1(
                tenant_id=tenant_id,
                project=project,
                month=month,
                threshold_pct=threshold,
                spend_micros=decision.state.spent_micro,
                budget_micros=budget.limit_micro,
                hard_stop=decision.hard_stop,
            )
            await uow.emit(event, tenant=tenant_id)
    for state in states.values():
        await budgets.save_state(tenant_id, project, state)
