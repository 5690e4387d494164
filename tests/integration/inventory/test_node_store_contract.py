"""One contract for the allocation ledger inventory's handlers keep: FakeNodeStore and Store."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import asyncpg
import pytest

from services.inventory.adapters.node_store import AllocationRow
from services.inventory.adapters.node_store_fake import FakeNodeStore
from services.inventory.adapters.unit_of_work import PostgresInventoryUnitOfWork
from services.inventory.adapters.unit_of_work_fake import FakeInventoryUnitOfWork
from services.inventory.service.unit_of_work import AllocationLedger
from tests.integration.store_contract import Units, fake_units, service_pool, sql_units
from tests.integration.support import Isolation

pytestmark = pytest.mark.integration

T0 = datetime(2025, 3, 14, 9, 30, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Subject:
    units: Units[AllocationLedger]
    live: Callable[[], Awaitable[list[AllocationRow]]]  # allocations not released, by id
    released: Callable[[], Awaitable[dict[str, datetime]]]  # placement -> when it was released


def fake_subject() -> Subject:
    fake = FakeNodeStore()

    async def live() -> list[AllocationRow]:
        return sorted(fake.live(), key=lambda r: r.allocation_id)

    async def released() -> dict[str, datetime]:
        return fake.released

    units = fake_units(FakeInventoryUnitOfWork(fake), lambda uow: uow.ledger)
    return Subject(units=units, live=live, released=released)


def sql_subject(pool: asyncpg.Pool[Any]) -> Subject:
    async def live() -> list[AllocationRow]:
        rows = await pool.fetch(
            "SELECT allocation_id, placement_id, workload_id, tenant_id, gpu_uuid, partition_id, units "
            "FROM allocations WHERE NOT released ORDER BY allocation_id"
        )
        return [AllocationRow(**dict(r)) for r in rows]

    async def released() -> dict[str, datetime]:
        rows = await pool.fetch("SELECT placement_id, released_at FROM released_placements")
        return {r["placement_id"]: r["released_at"] for r in rows}

    units = sql_units(pool, PostgresInventoryUnitOfWork, lambda uow: uow.ledger)
    return Subject(units=units, live=live, released=released)


@pytest.fixture(params=["fake", "postgres"])
async def subject(request: pytest.FixtureRequest, isolation: Isolation) -> AsyncIterator[Subject]:
    if request.param == "fake":
        yield fake_subject()
        return
    async with service_pool(isolation, "inventory") as pool:
        yield sql_subject(pool)


def item(placement: str, gpu: str, *, partition: str | None = None) -> AllocationRow:
    return AllocationRow(
        allocation_id=f"{placement}/{gpu}/{partition or ''}",
        placement_id=placement,
        workload_id=f"wl-{placement}",
        tenant_id="acme",
        gpu_uuid=gpu,
        partition_id=partition,
        units=Decimal("1.5") if partition else Decimal(8),
    )


async def test_an_allocation_is_recorded_once_and_a_repeat_of_its_id_changes_nothing(
    subject: Subject,
) -> None:
    first = item("p1", "g1")
    async with subject.units() as ledger:
        assert await ledger.add_allocation(row=first, at=T0) is True
        assert await ledger.add_allocation(row=item("p1", "g2", partition="mig-0"), at=T0) is True
    async with subject.units() as ledger:
        again = replace(first, workload_id="wl-other", units=Decimal(1))
        assert await ledger.add_allocation(row=again, at=T0 + timedelta(minutes=1)) is False

    assert await subject.live() == [item("p1", "g1"), item("p1", "g2", partition="mig-0")]


async def test_releasing_a_placement_frees_each_of_its_gpus_once_and_leaves_the_others_live(
    subject: Subject,
) -> None:
    async with subject.units() as ledger:
        for row in (
            item("p1", "g2", partition="mig-0"),
            item("p1", "g2", partition="mig-1"),
            item("p1", "g1"),
            item("p2", "g3"),
        ):
            await ledger.add_allocation(row=row, at=T0)
    async with subject.units() as ledger:
        assert await ledger.placement_released(placement_id="p1") is False
        assert await ledger.release_placement(placement_id="p1", at=T0 + timedelta(hours=1)) == ["g1", "g2"]
        assert await ledger.placement_released(placement_id="p1") is True
        assert await ledger.placement_released(placement_id="p2") is False

    assert await subject.live() == [item("p2", "g3")]
    assert await subject.released() == {"p1": T0 + timedelta(hours=1)}


async def test_a_replayed_release_frees_nothing_and_the_first_release_time_stays(subject: Subject) -> None:
    async with subject.units() as ledger:
        await ledger.add_allocation(row=item("p1", "g1"), at=T0)
    async with subject.units() as ledger:
        assert await ledger.release_placement(placement_id="p1", at=T0 + timedelta(hours=2)) == ["g1"]
    async with subject.units() as ledger:
        assert await ledger.release_placement(placement_id="p1", at=T0 + timedelta(hours=1)) == []

    assert await subject.released() == {"p1": T0 + timedelta(hours=2)}, "the release that arrived first wins"


async def test_an_end_that_arrived_before_its_placement_is_remembered(subject: Subject) -> None:
    async with subject.units() as ledger:
        assert await ledger.release_placement(placement_id="p1", at=T0) == []
    async with subject.units() as ledger:
        assert await ledger.placement_released(placement_id="p1") is True
        assert await ledger.placement_released(placement_id="never-seen") is False

    assert await subject.released() == {"p1": T0}
    assert await subject.live() == []


async def test_an_allocation_added_after_its_placement_was_released_is_live_until_released_again(
    subject: Subject,
) -> None:
    # The handler refuses such a placement (placement_released); the ledger itself still records it.
    async with subject.units() as ledger:
        await ledger.add_allocation(row=item("p1", "g1"), at=T0)
        await ledger.release_placement(placement_id="p1", at=T0 + timedelta(minutes=1))
    async with subject.units() as ledger:
        assert await ledger.add_allocation(row=item("p1", "g1"), at=T0) is False, "its id is in the ledger"
        assert await ledger.add_allocation(row=item("p1", "g2"), at=T0 + timedelta(minutes=2)) is True
    assert await subject.live() == [item("p1", "g2")]

    async with subject.units() as ledger:
        assert await ledger.release_placement(placement_id="p1", at=T0 + timedelta(minutes=3)) == ["g2"]
    assert await subject.live() == []
    assert await subject.released() == {"p1": T0 + timedelta(minutes=1)}


async def test_allocations_and_releases_of_a_unit_of_work_that_does_not_commit_are_not_kept(
    subject: Subject,
) -> None:
    async with subject.units() as ledger:
        await ledger.add_allocation(row=item("p1", "g1"), at=T0)
    async with subject.units.rolled_back() as ledger:
        assert await ledger.add_allocation(row=item("p2", "g2"), at=T0) is True
        assert await ledger.release_placement(placement_id="p1", at=T0 + timedelta(hours=1)) == ["g1"]
        assert await ledger.release_placement(placement_id="p3", at=T0) == []

    assert await subject.live() == [item("p1", "g1")]
    assert await subject.released() == {}
    async with subject.units() as ledger:
        assert await ledger.placement_released(placement_id="p1") is False
        assert await ledger.add_allocation(row=item("p2", "g2"), at=T0) is True, "its id was not kept"


async def test_a_live_allocation_moves_onto_another_gpu_once_and_a_released_one_stays(
    subject: Subject,
) -> None:
    async with subject.units() as ledger:
        await ledger.add_allocation(row=item("p1", "g1"), at=T0)
        await ledger.add_allocation(row=item("p2", "g2"), at=T0)
        await ledger.release_placement(placement_id="p2", at=T0 + timedelta(minutes=1))

    async with subject.units() as ledger:
        assert (
            await ledger.move_allocation(old_id=item("p1", "g1").allocation_id, row=item("p1", "g3")) is True
        )
        assert (
            await ledger.move_allocation(old_id=item("p1", "g1").allocation_id, row=item("p1", "g4")) is False
        )
        assert (
            await ledger.move_allocation(old_id=item("p2", "g2").allocation_id, row=item("p2", "g5")) is False
        )

    assert await subject.live() == [item("p1", "g3")]
