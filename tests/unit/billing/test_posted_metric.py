"""billing_posted_micros_total counts what the ledger keeps: new entries only, once their transaction
has committed, by tenant, project and kind."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from decimal import Decimal

import pytest

from libs.common.events.scheduler import AllocationItem, WorkloadEndedV1, WorkloadPlacedV1, WorkloadRunningV1
from libs.common.observability.metrics import TENANT_REGISTRY as REGISTRY
from libs.common.testing import handler_context
from services.billing.adapters.price_store_fake import FakePriceStore
from services.billing.adapters.unit_of_work_fake import FakeBillingUnitOfWork
from services.billing.domain.idle import IdlePolicy
from services.billing.service.handlers import (
    BillingDeps,
    on_workload_ended,
    on_workload_placed,
    on_workload_running,
)
from services.billing.service.metering import MeteringConfig, accrue
from services.billing.service.metrics import POSTED
from tests.unit.billing.factories import T0, flat_prices, minutes

DEPS = BillingDeps(metering=MeteringConfig(), idle=IdlePolicy())
PER_MINUTE = 60_000  # flat_prices: one GPU-hour at 3.60
PLACED = WorkloadPlacedV1(
    workload_id="w1",
    tenant_id="acme",
    placement_id="p1",
    node="node-1",
    allocations=[AllocationItem(gpu_uuid="GPU-0", units=Decimal(8), model="A100-80GB")],
    kind="job",
    tags={"project": "vision"},
)
RUNNING = WorkloadRunningV1(
    workload_id="w1", tenant_id="acme", placement_id="p1", node="node-1", started_at=T0
)
ENDED = WorkloadEndedV1(workload_id="w1", tenant_id="acme", placement_id="p1", outcome="completed")


@pytest.fixture(autouse=True)
def _fresh_counter() -> Iterator[None]:
    POSTED.clear()
    yield
    POSTED.clear()


def _posted(kind: str) -> float:
    labels = {"tenant": "acme", "project": "vision", "kind": kind}
    return REGISTRY.get_sample_value("billing_posted_micros_total", labels) or 0.0


async def _start(uow: FakeBillingUnitOfWork) -> None:
    """The placement and its running fact at T0, each in its own transaction."""
    async with uow:
        await on_workload_placed(PLACED, handler_context(PLACED, uow=uow, deps=DEPS, time=T0))
        await uow.commit()
    async with uow:
        await on_workload_running(RUNNING, handler_context(RUNNING, uow=uow, deps=DEPS, time=T0))
        await uow.commit()


async def _deliver(uow: FakeBillingUnitOfWork, at: datetime, *, commit: bool = True) -> None:
    """Start the workload, then end it at `at` (committed unless told otherwise)."""
    await _start(uow)
    async with uow:
        await on_workload_ended(ENDED, handler_context(ENDED, uow=uow, deps=DEPS, time=at))
        if commit:
            await uow.commit()


def _uow() -> FakeBillingUnitOfWork:
    return FakeBillingUnitOfWork(prices=FakePriceStore(flat_prices().entries))


async def test_a_charge_counts_for_its_tenant_and_project_once_committed() -> None:
    uow = _uow()

    await _deliver(uow, T0 + minutes(3))

    assert _posted("charge") == 3 * PER_MINUTE
    assert sum(r.amount_micro for r in uow.ledger.records) == _posted("charge")


async def test_a_charge_rolled_back_counts_nothing() -> None:
    await _deliver(_uow(), T0 + minutes(3), commit=False)

    assert _posted("charge") == 0


async def test_an_end_delivered_again_charges_and_counts_nothing_more() -> None:
    uow = _uow()
    await _deliver(uow, T0 + minutes(2))

    async with uow:
        await on_workload_ended(ENDED, handler_context(ENDED, uow=uow, deps=DEPS, time=T0 + minutes(2)))
        await uow.commit()

    assert _posted("charge") == 2 * PER_MINUTE
    assert len(uow.ledger.records) == 2


async def test_an_overrun_reversed_at_the_end_counts_as_a_reversal_so_the_net_is_what_was_used() -> None:
    uow = _uow()
    await _start(uow)
    async with uow:
        await accrue(uow, now=T0 + minutes(10), config=DEPS.metering)
        await uow.commit()
    async with uow:
        await on_workload_ended(ENDED, handler_context(ENDED, uow=uow, deps=DEPS, time=T0 + minutes(4)))
        await uow.commit()

    assert _posted("charge") == 10 * PER_MINUTE
    assert _posted("reversal") == 6 * PER_MINUTE
    assert _posted("charge") - _posted("reversal") == sum(r.amount_micro for r in uow.ledger.records)
