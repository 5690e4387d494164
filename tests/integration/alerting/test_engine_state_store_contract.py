"""One contract for the signal queue alerting's handlers write: FakeStateStore and StateStore."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import asyncpg
import pytest

from services.alerting.adapters.engine_state_store import StateStore
from services.alerting.adapters.engine_state_store_fake import FakeStateStore
from services.alerting.adapters.unit_of_work import PostgresAlertingUnitOfWork
from services.alerting.adapters.unit_of_work_fake import FakeAlertingUnitOfWork
from services.alerting.domain.signals import Signal, budget_signal, fault_signal
from services.alerting.service.unit_of_work import SignalQueue
from tests.integration.store_contract import Units, fake_units, service_pool, sql_units
from tests.integration.support import Isolation

pytestmark = pytest.mark.integration

T0 = datetime(2025, 3, 14, 9, 30, 0, 123456, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Subject:
    units: Units[SignalQueue]
    queued: Callable[[], Awaitable[list[Signal]]]  # what the evaluator takes, oldest first


def fake_subject() -> Subject:
    fake = FakeStateStore()

    async def queued() -> list[Signal]:
        return list(fake.signals)

    units = fake_units(FakeAlertingUnitOfWork(fake), lambda uow: uow.signals)
    return Subject(units=units, queued=queued)


def sql_subject(pool: asyncpg.Pool[Any]) -> Subject:
    async def queued() -> list[Signal]:
        async with pool.acquire() as conn:
            return [signal for _, signal in await StateStore(conn).take_signals()]

    units = sql_units(pool, PostgresAlertingUnitOfWork, lambda uow: uow.signals)
    return Subject(units=units, queued=queued)


@pytest.fixture(params=["fake", "postgres"])
async def subject(request: pytest.FixtureRequest, isolation: Isolation) -> AsyncIterator[Subject]:
    if request.param == "fake":
        yield fake_subject()
        return
    async with service_pool(isolation, "alerting") as pool:
        yield sql_subject(pool)


FAULT = fault_signal(kind="xid", node="n1", gpu="g1", xid=79, at=T0, evidence={"count": 3})
LOST = fault_signal(kind="lost", node="n1", gpu="g2", xid=None, at=T0 + timedelta(seconds=1), evidence={})
BUDGET = budget_signal(
    tenant="acme",
    project="vision",
    month="2025-03",
    threshold_pct=100,
    hard_stop=True,
    at=datetime(2025, 3, 14, 11, 30, tzinfo=timezone(timedelta(hours=2))),
)


async def test_signals_are_queued_in_the_order_they_were_written_across_units_of_work(
    subject: Subject,
) -> None:
    async with subject.units() as queue:
        await queue.queue_signal(BUDGET)
        await queue.queue_signal(FAULT)
    async with subject.units() as queue:
        await queue.queue_signal(LOST)

    assert await subject.queued() == [BUDGET, FAULT, LOST]


async def test_a_signal_comes_back_whole_and_the_same_signal_twice_is_queued_twice(subject: Subject) -> None:
    async with subject.units() as queue:
        await queue.queue_signal(FAULT)
        await queue.queue_signal(FAULT)

    queued = await subject.queued()
    assert queued == [FAULT, FAULT], "the queue keeps every signal: the evaluator folds repeats"
    assert queued[0].model_dump() == FAULT.model_dump()
    assert queued[0].at == T0


async def test_signals_of_a_unit_of_work_that_does_not_commit_are_not_queued(subject: Subject) -> None:
    async with subject.units() as queue:
        await queue.queue_signal(FAULT)
    async with subject.units.rolled_back() as queue:
        await queue.queue_signal(LOST)
        await queue.queue_signal(BUDGET)

    assert await subject.queued() == [FAULT]
