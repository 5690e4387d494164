"""One contract for the allocation writes of telemetry's handlers: FakeAllocationStore, AllocationStore."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from services.telemetry.adapters.allocation_store import AllocationStore
from services.telemetry.adapters.allocation_store_fake import FakeAllocationStore
from services.telemetry.adapters.unit_of_work import PostgresTelemetryUnitOfWork
from services.telemetry.adapters.unit_of_work_fake import FakeTelemetryUnitOfWork
from services.telemetry.domain.allocations import AllocationRow
from services.telemetry.service.unit_of_work import AllocationWriter
from tests.integration.store_contract import Units, fake_units, service_pool, sql_units
from tests.integration.support import Isolation

pytestmark = pytest.mark.integration

T0 = datetime(2025, 3, 14, 9, 30, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Subject:
    units: Units[AllocationWriter]
    allocations: Callable[[], Awaitable[list[AllocationRow]]]  # what the allocation view reads back


@pytest.fixture(params=["fake", "postgres"])
async def subject(request: pytest.FixtureRequest, isolation: Isolation) -> AsyncIterator[Subject]:
    if request.param == "fake":
        fake = FakeAllocationStore()
        units = fake_units(FakeTelemetryUnitOfWork(fake), lambda uow: uow.allocations)
        yield Subject(units=units, allocations=fake.allocations)
        return
    async with service_pool(isolation, "telemetry") as pool:
        yield Subject(
            units=sql_units(pool, PostgresTelemetryUnitOfWork, lambda uow: uow.allocations),
            allocations=AllocationStore(pool).allocations,
        )


async def place(
    subject: Subject, placement: str, *, gpus: list[str], at: datetime, workload: str = "wl-1"
) -> None:
    async with subject.units() as store:
        await store.add_allocations(
            placement_id=placement, workload_id=workload, tenant_id="acme", node="n1", placed_at=at, gpus=gpus
        )


async def end(subject: Subject, placement: str) -> None:
    async with subject.units() as store:
        await store.remove_placement(placement_id=placement)


def row(gpu: str, workload: str = "wl-1") -> AllocationRow:
    return AllocationRow(gpu_uuid=gpu, workload_id=workload, tenant_id="acme", node="n1")


async def test_each_gpu_of_a_placement_is_one_allocation_listed_oldest_first(subject: Subject) -> None:
    await place(subject, "p-late", gpus=["g3"], at=T0 + timedelta(minutes=2), workload="wl-3")
    await place(subject, "p-early", gpus=["g1"], at=T0, workload="wl-1")
    await place(subject, "p-mid", gpus=["g2"], at=T0 + timedelta(minutes=1), workload="wl-2")
    await place(subject, "p-none", gpus=[], at=T0)

    assert await subject.allocations() == [row("g1", "wl-1"), row("g2", "wl-2"), row("g3", "wl-3")]


async def test_a_redelivered_placement_keeps_the_rows_already_there_and_adds_only_new_gpus(
    subject: Subject,
) -> None:
    await place(subject, "p1", gpus=["g1", "g2"], at=T0, workload="wl-1")
    await place(subject, "p1", gpus=["g1", "g2"], at=T0 + timedelta(minutes=5), workload="wl-other")
    assert sorted(await subject.allocations(), key=lambda r: r.gpu_uuid) == [row("g1"), row("g2")]

    await place(subject, "p1", gpus=["g2", "g3"], at=T0 + timedelta(minutes=1), workload="wl-late")
    *first, last = await subject.allocations()
    assert sorted(first, key=lambda r: r.gpu_uuid) == [row("g1"), row("g2")], "g2 keeps its first row"
    assert last == row("g3", "wl-late")


async def test_one_gpu_held_by_two_placements_is_two_allocations(subject: Subject) -> None:
    await place(subject, "p-old", gpus=["g1"], at=T0, workload="wl-1")
    await place(subject, "p-new", gpus=["g1"], at=T0 + timedelta(minutes=1), workload="wl-2")

    assert await subject.allocations() == [row("g1", "wl-1"), row("g1", "wl-2")]


async def test_an_ended_placement_frees_only_its_own_gpus_and_ending_again_or_unknown_is_harmless(
    subject: Subject,
) -> None:
    await place(subject, "p1", gpus=["g1", "g2"], at=T0, workload="wl-1")
    await place(subject, "p2", gpus=["g3"], at=T0 + timedelta(minutes=1), workload="wl-2")

    await end(subject, "p1")
    assert await subject.allocations() == [row("g3", "wl-2")]
    await end(subject, "p1")
    await end(subject, "never-placed")
    assert await subject.allocations() == [row("g3", "wl-2")]

    await place(subject, "p1", gpus=["g1"], at=T0 + timedelta(minutes=2), workload="wl-1")
    assert await subject.allocations() == [row("g3", "wl-2"), row("g1", "wl-1")], (
        "nothing remembers an ended placement: placed again, it is held again"
    )


async def test_placements_and_ends_of_a_unit_of_work_that_does_not_commit_are_not_kept(
    subject: Subject,
) -> None:
    await place(subject, "p1", gpus=["g1"], at=T0, workload="wl-1")
    async with subject.units.rolled_back() as store:
        await store.add_allocations(
            placement_id="p2", workload_id="wl-2", tenant_id="acme", node="n1", placed_at=T0, gpus=["g2"]
        )
        await store.remove_placement(placement_id="p1")

    assert await subject.allocations() == [row("g1", "wl-1")]


async def test_a_moved_placement_holds_its_new_gpus_in_its_place_and_an_ended_one_stays_gone(
    subject: Subject,
) -> None:
    await place(subject, "p1", gpus=["g1", "g2"], at=T0, workload="wl-1")
    await place(subject, "p2", gpus=["g9"], at=T0 + timedelta(minutes=1), workload="wl-2")
    await place(subject, "p3", gpus=["g5"], at=T0, workload="wl-3")
    await end(subject, "p3")

    async with subject.units() as store:
        await store.move_placement(placement_id="p1", gpus=["g3", "g2"])
        await store.move_placement(placement_id="p3", gpus=["g6"])

    found = await subject.allocations()
    assert sorted(found[:2], key=lambda r: r.gpu_uuid) == [row("g2", "wl-1"), row("g3", "wl-1")]
    assert found[2:] == [row("g9", "wl-2")]
