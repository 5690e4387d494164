from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from libs.common.events.billing import BudgetThresholdCrossedV1, UsageDecayedV1
from libs.common.testing import handler_context
from services.scheduler.adapters.fleet_store_fake import Stop
from services.scheduler.adapters.unit_of_work_fake import FakeSchedulerUnitOfWork
from services.scheduler.service.handlers import (
    SchedulerDeps,
    on_budget_threshold_crossed,
    on_usage_decayed,
)

T0 = datetime(2025, 3, 14, 9, 30, tzinfo=UTC)
DEPS = SchedulerDeps(half_life=timedelta(days=7))


def _crossed(*, hard_stop: bool) -> BudgetThresholdCrossedV1:
    return BudgetThresholdCrossedV1(
        tenant_id="acme",
        project="vision",
        month="2025-03",
        threshold_pct=100,
        spend_micros=1_000_000,
        budget_micros=1_000_000,
        hard_stop=hard_stop,
    )


async def test_a_hard_stop_threshold_refuses_new_work_for_the_project_that_month() -> None:
    uow = FakeSchedulerUnitOfWork()
    store = uow.fleet
    event = _crossed(hard_stop=True)

    async with uow:
        await on_budget_threshold_crossed(event, handler_context(event, uow=uow, deps=DEPS))
        await uow.commit()

    assert store.stops == [
        Stop(
            tenant="acme",
            project="vision",
            month="2025-03",
            reason="project 'vision' reached 100% of its 2025-03 budget (hard stop)",
        )
    ]
    assert uow.events == []


async def test_a_threshold_without_hard_stop_refuses_nothing() -> None:
    uow = FakeSchedulerUnitOfWork()
    store = uow.fleet
    event = _crossed(hard_stop=False)

    async with uow:
        await on_budget_threshold_crossed(event, handler_context(event, uow=uow, deps=DEPS))
        await uow.commit()

    assert store.stops == []


async def test_billings_decayed_usage_replaces_the_local_estimate_as_of_the_event() -> None:
    uow = FakeSchedulerUnitOfWork()
    store = uow.fleet
    store.usage["acme"] = (99.0, T0 - timedelta(hours=1))
    event = UsageDecayedV1(tenant_id="acme", decayed_unit_hours=Decimal("12.5"), half_life_hours=168.0)

    async with uow:
        await on_usage_decayed(event, handler_context(event, uow=uow, deps=DEPS, time=T0))
        await uow.commit()

    assert store.usage == {"acme": (12.5, T0)}


async def test_a_stop_recorded_by_a_delivery_that_fails_before_its_commit_is_not_kept() -> None:
    uow = FakeSchedulerUnitOfWork()
    event = _crossed(hard_stop=True)

    async with uow:
        await on_budget_threshold_crossed(event, handler_context(event, uow=uow, deps=DEPS))

    assert uow.fleet.stops == []
    assert uow.events == []
