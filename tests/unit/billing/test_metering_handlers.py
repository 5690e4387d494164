"""Billing's lifecycle handlers and accrual on the fake unit of work: charges, budgets, tags, no database.

A placement is charged from the host's running fact (WorkloadRunningV1.started_at) to its end fact
(WorkloadEndedV1.ended_at), never from its placement nor from when the scheduler sent the end.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, TypedDict

from libs.common.events.agent import MigrationStepV1, WorkloadExitedV1, WorkloadStartedV1
from libs.common.events.billing import BudgetThresholdCrossedV1
from libs.common.events.scheduler import AllocationItem, WorkloadEndedV1, WorkloadPlacedV1, WorkloadRunningV1
from libs.common.testing import handler_context
from services.billing.adapters.price_store_fake import FakePriceStore
from services.billing.adapters.unit_of_work_fake import FakeBillingUnitOfWork
from services.billing.domain.host_facts import HostFact, HostFactKind
from services.billing.domain.idle import IdlePolicy
from services.billing.domain.rating import EndReason
from services.billing.domain.reconciliation import FactKind
from services.billing.domain.tags import FlaggedWorkload
from services.billing.service.handlers import (
    BillingDeps,
    on_host_exited,
    on_host_migration_step,
    on_host_started,
    on_workload_ended,
    on_workload_placed,
    on_workload_running,
)
from services.billing.service.metering import MeteringConfig, accrue
from tests.unit.billing.factories import T0, flat_prices, minutes


class _Ids(TypedDict):
    """Which report: the fields every node agent report about a workload carries."""

    workload_id: str
    tenant_id: str
    placement_id: str
    node: str


DEPS = BillingDeps(metering=MeteringConfig(), idle=IdlePolicy())
PER_MINUTE = 60_000  # flat_prices: one GPU-hour at 3.60, per GPU


def _uow() -> FakeBillingUnitOfWork:
    return FakeBillingUnitOfWork(prices=FakePriceStore(flat_prices().entries))


def _placed(*, gpus: int = 1, tags: dict[str, str] | None = None, pid: str = "p1") -> WorkloadPlacedV1:
    items = [AllocationItem(gpu_uuid=f"GPU-{i}", units=Decimal(8), model="A100-80GB") for i in range(gpus)]
    return WorkloadPlacedV1(
        workload_id="w1",
        tenant_id="acme",
        placement_id=pid,
        node="node-1",
        allocations=items,
        kind="job",
        tags={"project": "vision", **(tags or {})},
    )


ENDED = WorkloadEndedV1(workload_id="w1", tenant_id="acme", placement_id="p1", outcome="completed")


async def _place(uow: FakeBillingUnitOfWork, at: datetime, **placed: Any) -> None:
    event = _placed(**placed)
    async with uow:
        await on_workload_placed(event, handler_context(event, uow=uow, deps=DEPS, time=at))
        await uow.commit()


async def _run(
    uow: FakeBillingUnitOfWork, started_at: datetime, *, pid: str = "p1", sent: datetime | None = None
) -> None:
    """Deliver the scheduler's running event: the host's start, sent at `sent` (default: at once)."""
    event = WorkloadRunningV1(
        workload_id="w1", tenant_id="acme", placement_id=pid, node="node-1", started_at=started_at
    )
    async with uow:
        await on_workload_running(event, handler_context(event, uow=uow, deps=DEPS, time=sent or started_at))
        await uow.commit()


async def _place_and_run(uow: FakeBillingUnitOfWork, at: datetime, **placed: Any) -> None:
    await _place(uow, at, **placed)
    await _run(uow, at, pid=placed.get("pid", "p1"))


async def _end(uow: FakeBillingUnitOfWork, at: datetime) -> None:
    """Deliver the end, each time under a new event id (as a republished fact would be)."""
    async with uow:
        await on_workload_ended(ENDED, handler_context(ENDED, uow=uow, deps=DEPS, time=at))
        await uow.commit()


async def _end_at(
    uow: FakeBillingUnitOfWork,
    ended_at: datetime,
    *,
    sent: datetime,
    pid: str = "p1",
    outcome: str = "completed",
) -> None:
    """Deliver the scheduler's end of the host's exit at `ended_at`, sent at `sent`."""
    event = WorkloadEndedV1(
        workload_id="w1",
        tenant_id="acme",
        placement_id=pid,
        outcome=outcome,  # type: ignore[arg-type]
        ended_at=ended_at,
    )
    async with uow:
        await on_workload_ended(event, handler_context(event, uow=uow, deps=DEPS, time=sent))
        await uow.commit()


def _total(uow: FakeBillingUnitOfWork) -> int:
    return sum(r.amount_micro for r in uow.ledger.records)


async def test_a_running_placement_is_charged_to_its_end_per_gpu_held() -> None:
    uow = _uow()

    await _place_and_run(uow, T0, gpus=2)
    await _end(uow, T0 + minutes(3.5))

    assert _total(uow) == 2 * PER_MINUTE * 3 + PER_MINUTE  # two GPUs, three minutes and a half
    [row] = await uow.allocations.all_allocations()
    assert not row.open
    assert row.allocation.ended_at == T0 + minutes(3.5)
    assert row.allocation.end_reason is EndReason.COMPLETED


async def test_an_end_delivered_again_with_a_new_id_charges_nothing_more() -> None:
    uow = _uow()
    await _place_and_run(uow, T0)
    await _end(uow, T0 + minutes(2))

    await _end(uow, T0 + minutes(2))

    assert _total(uow) == 2 * PER_MINUTE
    assert len(uow.ledger.records) == 2


async def test_a_start_and_an_end_that_arrive_before_the_placement_are_applied_when_it_comes() -> None:
    uow = _uow()

    await _run(uow, T0)
    await _end(uow, T0 + minutes(1))
    await _place(uow, T0)

    assert _total(uow) == PER_MINUTE
    assert [r.open for r in await uow.allocations.all_allocations()] == [False]


async def test_an_end_before_what_accrual_rated_reverses_the_overrun() -> None:
    uow = _uow()
    await _place_and_run(uow, T0)
    async with uow:
        assert await accrue(uow, now=T0 + minutes(10), config=DEPS.metering) == 1
        await uow.commit()
    assert _total(uow) == 10 * PER_MINUTE

    await _end(uow, T0 + minutes(4))

    assert _total(uow) == 4 * PER_MINUTE
    assert sum(r.entry.reverses_entry_id is not None for r in uow.ledger.records) == 6


async def test_charges_that_cross_a_budgets_thresholds_announce_each_once() -> None:
    uow = _uow()
    await uow.budgets.put("acme", "vision", limit_micro=4 * PER_MINUTE, thresholds=[50, 100], hard_stop=True)
    await _place_and_run(uow, T0)

    await _end(uow, T0 + minutes(5))

    crossed = [e for e in uow.events if isinstance(e, BudgetThresholdCrossedV1)]
    assert [(e.threshold_pct, e.hard_stop) for e in crossed] == [(50, False), (100, True)]
    state = await uow.budgets.state("acme", "vision", "2025-03")
    assert (state.spent_micro, state.crossed) == (5 * PER_MINUTE, frozenset({50, 100}))


async def test_a_placement_lacking_a_required_tag_is_flagged_and_opened_with_the_tenants_default_tags() -> (
    None
):
    uow = _uow()
    await uow.policies.set_required("acme", ["team", "cost-center"])
    await uow.policies.set_tenant_tags("acme", {"cost-center": "cc-1"})

    await _place(uow, T0)

    assert uow.policies.flagged == [
        FlaggedWorkload(
            workload_id="w1", placement_id="p1", tenant_id="acme", missing=("team",), flagged_at=T0
        )
    ]
    [row] = await uow.allocations.all_allocations()
    assert row.allocation.tags == {"project": "vision", "cost-center": "cc-1"}


async def test_charges_of_a_delivery_that_fails_before_its_commit_are_not_kept() -> None:
    uow = _uow()
    await _place_and_run(uow, T0)
    ctx = handler_context(ENDED, uow=uow, deps=DEPS, time=T0 + minutes(3))

    async with uow:
        await on_workload_ended(ENDED, ctx)
        assert uow.ledger.records != []  # the handler did charge, inside the delivery

    assert uow.ledger.records == []
    assert [r.open for r in await uow.allocations.all_allocations()] == [True]
    assert [f.kind for f in await uow.allocations.facts()] == [FactKind.PLACED, FactKind.RUNNING]


async def test_a_placement_is_charged_from_the_hosts_start_not_from_its_placement() -> None:
    uow = _uow()
    await _place(uow, T0)
    async with uow:  # accrual before the host runs it rates nothing
        assert await accrue(uow, now=T0 + minutes(5), config=DEPS.metering) == 0
        await uow.commit()
    assert _total(uow) == 0

    await _run(uow, T0 + minutes(2), sent=T0 + minutes(2.5))
    await _end_at(uow, T0 + minutes(5.5), sent=T0 + minutes(6))

    assert _total(uow) == 3 * PER_MINUTE + PER_MINUTE // 2  # 02:00 to 05:30, when the host ran it
    [row] = await uow.allocations.all_allocations()
    assert (row.allocation.started_at, row.allocation.ended_at) == (T0 + minutes(2), T0 + minutes(5.5))


async def test_with_the_scheduler_down_the_charge_ends_at_the_hosts_exit_not_when_the_end_is_sent() -> None:
    uow = _uow()
    await _place_and_run(uow, T0)
    async with uow:  # the scheduler is down: accrual goes on rating past the exit meanwhile
        assert await accrue(uow, now=T0 + minutes(30), config=DEPS.metering) == 1
        await uow.commit()

    exited = T0 + minutes(5) + timedelta(seconds=12)
    await _end_at(
        uow, exited, sent=T0 + minutes(30) + timedelta(seconds=27)
    )  # sent when the scheduler is back

    assert _total(uow) == 5 * PER_MINUTE + PER_MINUTE // 5  # to 05:12, the overrun reversed
    [row] = await uow.allocations.all_allocations()
    assert row.allocation.ended_at == exited  # the same instant the scheduler stored as ended_at
    assert await uow.allocations.first_end("p1") == (exited, EndReason.COMPLETED)


async def test_a_move_is_charged_where_the_workload_was_until_it_runs_again_and_then_where_it_is() -> None:
    uow = _uow()
    await _place_and_run(uow, T0)
    moved_at = T0 + minutes(10)
    await _place(uow, moved_at, pid="p2")  # the scheduler's pass: the new placement, the old one's end
    await _end_at(uow, moved_at, sent=moved_at, outcome="migrated")
    async with uow:  # meanwhile accrual rates only where it runs: the old placement
        assert await accrue(uow, now=T0 + minutes(10.5), config=DEPS.metering) == 1
        await uow.commit()

    resumed = moved_at + timedelta(seconds=31)  # the agent's last migration step: one instant for both
    await _run(uow, resumed, pid="p2")
    await _end_at(uow, T0 + minutes(20), sent=T0 + minutes(20), pid="p2")

    rows = {r.placement_id: r for r in await uow.allocations.all_allocations()}
    assert rows["p1"].allocation.ended_at == rows["p2"].allocation.started_at == resumed
    assert rows["p1"].allocation.end_reason is EndReason.MIGRATED
    assert _total(uow) == 20 * PER_MINUTE  # no gap, no overlap
    p2_lines = [r for r in uow.ledger.records if r.allocation_id.startswith("p2/")]
    assert min(r.period_start for r in p2_lines) == resumed  # nothing on p2 before it ran


async def test_a_move_whose_new_placement_never_runs_ends_the_old_charge_at_the_new_ones_end() -> None:
    uow = _uow()
    await _place_and_run(uow, T0)
    await _place(uow, T0 + minutes(10), pid="p2")
    await _end_at(uow, T0 + minutes(10), sent=T0 + minutes(10), outcome="migrated")

    await _end_at(uow, T0 + minutes(12), sent=T0 + minutes(12), pid="p2", outcome="cancelled")

    assert _total(uow) == 12 * PER_MINUTE  # all of it on p1, where it last ran
    assert [r.open for r in await uow.allocations.all_allocations()] == [False, False]


async def test_a_running_event_republished_with_a_new_id_changes_nothing() -> None:
    uow = _uow()
    await _place_and_run(uow, T0)
    await _place(uow, T0 + minutes(3), pid="p2")
    await _run(uow, T0 + minutes(4), pid="p2")

    await _run(uow, T0, pid="p1")  # the old placement's start, again: it must not close p2 nor restart p1
    await _end_at(uow, T0 + minutes(6), sent=T0 + minutes(6), pid="p2")

    assert _total(uow) == 6 * PER_MINUTE
    rows = {r.placement_id: r for r in await uow.allocations.all_allocations()}
    assert rows["p1"].allocation.ended_at == T0 + minutes(4)


async def test_the_hosts_reports_are_kept_once_each_at_the_hosts_instant() -> None:
    uow = _uow()
    ids: _Ids = {"workload_id": "w1", "tenant_id": "acme", "placement_id": "p2", "node": "node-2"}
    started = WorkloadStartedV1(**ids, at=T0)
    steps = [
        MigrationStepV1(**ids, phase="restore", percent=80, at=T0 + minutes(1)),
        MigrationStepV1(**ids, phase="running", percent=100, at=T0 + minutes(2)),
    ]
    exited = WorkloadExitedV1(**ids, outcome="failed", at=T0 + minutes(3))
    async with uow:
        sent = T0 + minutes(9)  # read late: the instants are the host's, not the envelope's
        await on_host_started(started, handler_context(started, uow=uow, deps=DEPS, time=sent))
        await on_host_started(started, handler_context(started, uow=uow, deps=DEPS, time=sent))  # re-sent
        for step in steps:
            await on_host_migration_step(step, handler_context(step, uow=uow, deps=DEPS, time=sent))
        await on_host_exited(exited, handler_context(exited, uow=uow, deps=DEPS, time=sent))
        await uow.commit()

    facts = await uow.allocations.host_facts()
    assert [(f.kind, f.at, f.outcome) for f in facts] == [
        (HostFactKind.RUNNING, T0, None),
        (HostFactKind.RUNNING, T0 + minutes(2), None),
        (HostFactKind.EXITED, T0 + minutes(3), "failed"),
    ]
    assert facts[0] == HostFact(kind=HostFactKind.RUNNING, at=T0, **ids)


async def test_a_charge_crossing_several_thresholds_at_once_stops_on_the_highest_only() -> None:
    uow = _uow()
    await uow.budgets.put("acme", "vision", limit_micro=PER_MINUTE, thresholds=[50, 80, 100], hard_stop=True)
    await _place_and_run(uow, T0)

    await _end(uow, T0 + minutes(2))

    crossed = [e for e in uow.events if isinstance(e, BudgetThresholdCrossedV1)]
    assert [(e.threshold_pct, e.hard_stop) for e in crossed] == [(50, False), (80, False), (100, True)]
