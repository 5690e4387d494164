"""A reallocated placement is charged on without a break: billing prices models and units, not GPUs."""

from __future__ import annotations

import logging
from datetime import datetime
from decimal import Decimal
from typing import TypedDict

import pytest

from libs.common.events import Event
from libs.common.events.scheduler import (
    AllocationItem,
    WorkloadEndedV1,
    WorkloadPlacedV1,
    WorkloadReallocatedV1,
    WorkloadRunningV1,
)
from libs.common.testing import handler_context
from services.billing.adapters.price_store_fake import FakePriceStore
from services.billing.adapters.unit_of_work_fake import FakeBillingUnitOfWork
from services.billing.domain.idle import IdlePolicy
from services.billing.service.handlers import (
    BillingDeps,
    on_workload_ended,
    on_workload_placed,
    on_workload_reallocated,
    on_workload_running,
)
from services.billing.service.metering import MeteringConfig
from tests.unit.billing.factories import T0, flat_prices, minutes

DEPS = BillingDeps(metering=MeteringConfig(), idle=IdlePolicy())
PER_MINUTE = 60_000  # flat_prices: one GPU-hour at 3.60, per GPU


class _Ids(TypedDict):
    workload_id: str
    tenant_id: str
    placement_id: str


IDS: _Ids = {"workload_id": "w1", "tenant_id": "acme", "placement_id": "p1"}


def _items(*gpus: str, model: str = "A100-80GB") -> list[AllocationItem]:
    return [AllocationItem(gpu_uuid=g, units=Decimal(8), model=model) for g in gpus]


async def _deliver(uow: FakeBillingUnitOfWork, event: Event, at: datetime) -> None:
    ctx = handler_context(event, uow=uow, deps=DEPS, time=at)
    async with uow:
        if isinstance(event, WorkloadPlacedV1):
            await on_workload_placed(event, ctx)
        elif isinstance(event, WorkloadRunningV1):
            await on_workload_running(event, ctx)
        elif isinstance(event, WorkloadReallocatedV1):
            await on_workload_reallocated(event, ctx)
        elif isinstance(event, WorkloadEndedV1):
            await on_workload_ended(event, ctx)
        await uow.commit()


async def _charged(moved: WorkloadReallocatedV1) -> tuple[int, FakeBillingUnitOfWork]:
    """Two GPUs placed and run at T0, reallocated a minute and a half in, ended at 3.5 minutes."""
    uow = FakeBillingUnitOfWork(prices=FakePriceStore(flat_prices().entries))
    await _deliver(
        uow, WorkloadPlacedV1(**IDS, node="node-1", allocations=_items("g1", "g2"), kind="job"), T0
    )
    await _deliver(uow, WorkloadRunningV1(**IDS, node="node-1", started_at=T0), T0)
    await _deliver(uow, moved, T0 + minutes(1.5))
    ended = WorkloadEndedV1(**IDS, outcome="completed", ended_at=T0 + minutes(3.5))
    await _deliver(uow, ended, T0 + minutes(3.5))
    return sum(r.amount_micro for r in uow.ledger.records), uow


async def test_a_reallocated_placement_is_charged_as_one_continuous_run_of_the_same_units() -> None:
    moved = WorkloadReallocatedV1(
        **IDS, node="node-1", allocations=_items("g3", "g2"), previous=_items("g1", "g2")
    )

    total, uow = await _charged(moved)

    assert total == 2 * PER_MINUTE * 3 + PER_MINUTE  # as if it never moved: two GPUs, 3.5 minutes
    [row] = await uow.allocations.all_allocations()
    assert (row.allocation.started_at, row.allocation.ended_at) == (T0, T0 + minutes(3.5))


async def test_a_reallocation_priced_otherwise_keeps_the_placement_priced_as_placed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    moved = WorkloadReallocatedV1(
        **IDS, node="node-1", allocations=_items("h1", "g2", model="H100-80GB"), previous=_items("g1", "g2")
    )

    with caplog.at_level(logging.WARNING, logger="services.billing.service.handlers"):
        total, _uow = await _charged(moved)

    assert total == 2 * PER_MINUTE * 3 + PER_MINUTE
    assert any("p1 was reallocated onto devices priced otherwise" in r.getMessage() for r in caplog.records)
