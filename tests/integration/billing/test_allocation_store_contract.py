"""One contract for what billing's idle reclaim reads and writes: FakeAllocationStore and AllocationStore."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import asyncpg
import pytest

from services.billing.adapters.allocation_store import AllocationStore
from services.billing.adapters.allocation_store_fake import FakeAllocationStore, IdleActionRecord
from services.billing.domain.idle import IdleState
from services.billing.domain.prices import PricingClass, ResourceKey
from services.billing.domain.rating import Allocation
from services.billing.service.handlers import IdleStates
from tests.integration.store_contract import Units, fake_units, service_pool, sql_units
from tests.integration.support import Isolation

pytestmark = pytest.mark.integration

T0 = datetime(2025, 3, 14, 9, 30, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Subject:
    units: Units[IdleStates]
    open: Callable[[str, str, str], Awaitable[None]]  # (workload, tenant, kind): what a placement does
    actions: Callable[[], Awaitable[list[IdleActionRecord]]]  # by workload, stage and time


def fake_subject() -> Subject:
    fake = FakeAllocationStore()

    async def open_(workload_id: str, tenant_id: str, kind: str) -> None:
        fake.open(workload_id, tenant_id=tenant_id, kind=kind)

    async def actions() -> list[IdleActionRecord]:
        return sorted(fake.actions, key=lambda r: (r.workload_id, r.stage, r.at))

    return Subject(units=fake_units(fake), open=open_, actions=actions)


def sql_subject(pool: asyncpg.Pool[Any]) -> Subject:
    async def open_(workload_id: str, tenant_id: str, kind: str) -> None:
        # A placement of two GPUs: two allocations of one workload, as metering opens them.
        async with pool.acquire() as conn:
            for gpu in ("a", "b"):
                await AllocationStore(conn).open_allocation(
                    allocation=_allocation(f"{workload_id}/{gpu}", workload_id, tenant_id),
                    placement_id=f"p-{workload_id}",
                    kind=kind,
                )

    async def actions() -> list[IdleActionRecord]:
        rows = await pool.fetch(
            "SELECT workload_id, tenant_id, stage, idle_hours, at FROM idle_actions "
            "ORDER BY workload_id, stage, at"
        )
        return [IdleActionRecord(**dict(r)) for r in rows]

    return Subject(units=sql_units(pool, lambda uow: AllocationStore(uow.conn)), open=open_, actions=actions)


def _allocation(allocation_id: str, workload_id: str, tenant_id: str) -> Allocation:
    return Allocation(
        allocation_id=allocation_id,
        workload_id=workload_id,
        tenant_id=tenant_id,
        project="vision",
        resource=ResourceKey(gpu_model="A100-80GB"),
        pricing_class=PricingClass.ON_DEMAND,
        compute_units=Decimal(8),
        gpus=Decimal(1),
        started_at=T0,
    )


@pytest.fixture(params=["fake", "postgres"])
async def subject(request: pytest.FixtureRequest, isolation: Isolation) -> AsyncIterator[Subject]:
    if request.param == "fake":
        yield fake_subject()
        return
    async with service_pool(isolation, "billing") as pool:
        yield sql_subject(pool)


async def test_an_open_workload_answers_its_tenant_and_kind_and_an_unknown_one_nothing(
    subject: Subject,
) -> None:
    await subject.open("w1", "acme", "instance")
    await subject.open("w2", "globex", "job")

    async with subject.units() as store:
        assert await store.open_workload("w1") == ("acme", "instance")
        assert await store.open_workload("w2") == ("globex", "job")
        assert await store.open_workload("never-placed") is None


async def test_a_workload_never_seen_has_the_empty_idle_state(subject: Subject) -> None:
    async with subject.units() as store:
        assert await store.idle_state("w1") == IdleState()


async def test_a_saved_idle_state_is_read_back_and_saving_again_replaces_every_field(
    subject: Subject,
) -> None:
    warned = IdleState(
        idle_since=T0,
        observed_until=T0 + timedelta(hours=72),
        warned_at=T0 + timedelta(hours=72, microseconds=5),
        release_requested_at=None,
    )
    async with subject.units() as store:
        await store.save_idle(workload_id="w1", tenant_id="acme", state=warned)
        await store.save_idle(workload_id="w2", tenant_id="acme", state=IdleState(idle_since=T0))
    async with subject.units() as store:
        assert await store.idle_state("w1") == warned
        assert await store.idle_state("w2") == IdleState(idle_since=T0)

    busy_again = IdleState(observed_until=T0 + timedelta(hours=73))
    async with subject.units() as store:
        await store.save_idle(workload_id="w1", tenant_id="acme", state=busy_again)
    async with subject.units() as store:
        assert await store.idle_state("w1") == busy_again, "cleared fields are cleared, not kept"
        assert await store.idle_state("w2") == IdleState(idle_since=T0)


async def test_an_idle_action_is_kept_once_per_workload_stage_and_time_with_its_first_figures(
    subject: Subject,
) -> None:
    at = T0 + timedelta(hours=72)
    async with subject.units() as store:
        await store.record_idle_action(
            workload_id="w1", tenant_id="acme", stage="warning", idle_hours=72.0, at=at
        )
    async with subject.units() as store:
        # A redelivered rollup: the same action again, even with other figures, is already there.
        await store.record_idle_action(
            workload_id="w1", tenant_id="other", stage="warning", idle_hours=99.0, at=at
        )
        later = at + timedelta(hours=24)
        await store.record_idle_action(
            workload_id="w1", tenant_id="acme", stage="warning", idle_hours=96.0, at=later
        )
        await store.record_idle_action(
            workload_id="w1", tenant_id="acme", stage="release", idle_hours=96.0, at=later
        )
        await store.record_idle_action(
            workload_id="w2", tenant_id="acme", stage="warning", idle_hours=72.5, at=at
        )

    assert await subject.actions() == [
        IdleActionRecord("w1", "acme", "release", 96.0, later),
        IdleActionRecord("w1", "acme", "warning", 72.0, at),
        IdleActionRecord("w1", "acme", "warning", 96.0, later),
        IdleActionRecord("w2", "acme", "warning", 72.5, at),
    ]
