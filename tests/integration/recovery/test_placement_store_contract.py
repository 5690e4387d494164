"""One contract for the placement map and GPU health recovery's handlers keep: FakePlacementStore and
PlacementStore."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import asyncpg
import pytest

from services.recovery.adapters.placement_store_fake import FakePlacementStore
from services.recovery.adapters.unit_of_work import PostgresRecoveryUnitOfWork
from services.recovery.adapters.unit_of_work_fake import FakeRecoveryUnitOfWork
from services.recovery.domain.placements import Placement
from services.recovery.service.unit_of_work import PlacementMap
from tests.integration.store_contract import Units, fake_units, service_pool, sql_units
from tests.integration.support import Isolation

pytestmark = pytest.mark.integration


@dataclass(frozen=True, slots=True)
class Subject:
    units: Units[PlacementMap]
    priorities: Callable[[], Awaitable[dict[str, float]]]  # workload -> priority of its placement


def fake_subject() -> Subject:
    fake = FakePlacementStore()

    async def priorities() -> dict[str, float]:
        return fake.priorities

    units = fake_units(FakeRecoveryUnitOfWork(fake), lambda uow: uow.placements)
    return Subject(units=units, priorities=priorities)


def sql_subject(pool: asyncpg.Pool[Any]) -> Subject:
    async def priorities() -> dict[str, float]:
        rows = await pool.fetch("SELECT workload_id, priority FROM placements")
        return {r["workload_id"]: r["priority"] for r in rows}

    units = sql_units(pool, PostgresRecoveryUnitOfWork, lambda uow: uow.placements)
    return Subject(units=units, priorities=priorities)


@pytest.fixture(params=["fake", "postgres"])
async def subject(request: pytest.FixtureRequest, isolation: Isolation) -> AsyncIterator[Subject]:
    if request.param == "fake":
        yield fake_subject()
        return
    async with service_pool(isolation, "recovery") as pool:
        yield sql_subject(pool)


def placement(workload: str, placement_id: str, *, node: str, gpus: tuple[str, ...]) -> Placement:
    return Placement(workload_id=workload, tenant_id="acme", placement_id=placement_id, node=node, gpus=gpus)


# Workload ids sort the same under any collation: the SQL orders by the database's, the fake by code point.
W1 = placement("wl1", "p1", node="n1", gpus=("g2", "g1"))
W2 = placement("wl2", "p2", node="n1", gpus=("g2",))
W3 = placement("wl3", "p3", node="n2", gpus=("g3",))


async def test_placements_are_found_by_gpu_and_by_node_in_workload_order(subject: Subject) -> None:
    async with subject.units() as store:
        for p in (W3, W2, W1):
            await store.place(p, priority=float(p.workload_id[-1]))
    async with subject.units() as store:
        assert await store.on_gpu("g2") == [W1, W2]
        assert await store.on_gpu("g1") == [W1], "the GPUs keep the order they were placed in"
        assert await store.on_gpu("g-free") == []
        assert await store.on_node("n1") == [W1, W2]
        assert await store.on_node("n2") == [W3]
        assert await store.on_node("n-empty") == []
    assert await subject.priorities() == {"wl1": 1.0, "wl2": 2.0, "wl3": 3.0}


async def test_a_new_placement_of_a_workload_replaces_its_old_one(subject: Subject) -> None:
    moved = placement("wl1", "p1b", node="n2", gpus=("g4",))
    async with subject.units() as store:
        await store.place(W1, priority=1.0)
    async with subject.units() as store:
        await store.place(moved, priority=5.5)
    async with subject.units() as store:
        assert await store.on_gpu("g1") == []
        assert await store.on_node("n1") == []
        assert await store.on_gpu("g4") == [moved]
        assert await store.on_node("n2") == [moved]
    assert await subject.priorities() == {"wl1": 5.5}


async def test_an_ended_placement_is_forgotten_unless_the_workload_has_a_newer_one(subject: Subject) -> None:
    moved = placement("wl1", "p1b", node="n2", gpus=("g4",))
    async with subject.units() as store:
        await store.place(moved, priority=1.0)
        await store.place(W2, priority=2.0)
    async with subject.units() as store:
        await store.end(workload_id="wl1", placement_id="p1")  # the old placement's end arrives late
        await store.end(workload_id="wl-unknown", placement_id="p9")
    async with subject.units() as store:
        assert await store.on_node("n2") == [moved]

    async with subject.units() as store:
        await store.end(workload_id="wl1", placement_id="p1b")
        await store.end(workload_id="wl1", placement_id="p1b")
    async with subject.units() as store:
        assert await store.on_node("n2") == []
        assert await store.on_gpu("g2") == [W2]
    assert await subject.priorities() == {"wl2": 2.0}


async def test_gpu_health_is_the_last_report_and_gpus_never_reported_are_left_out(subject: Subject) -> None:
    async with subject.units() as store:
        assert await store.health_of(["g1"]) == {}
        await store.set_health(gpu="g1", node="n1", health="healthy")
        await store.set_health(gpu="g2", node="n1", health="draining")
    async with subject.units() as store:
        await store.set_health(gpu="g1", node="n2", health="failed")
    async with subject.units() as store:
        assert await store.health_of(["g1", "g2", "g-unknown", "g1"]) == {"g1": "failed", "g2": "draining"}
        assert await store.health_of(["g2"]) == {"g2": "draining"}
        assert await store.health_of([]) == {}


async def test_the_current_placements_of_given_workloads_are_found_and_unknown_ones_left_out(
    subject: Subject,
) -> None:
    moved = placement("wl1", "p1b", node="n2", gpus=("g4",))
    async with subject.units() as store:
        for p in (W1, W2, W3):
            await store.place(p, priority=1.0)
        await store.place(moved, priority=1.0)
    async with subject.units() as store:
        assert await store.of(["wl3", "wl1", "wl-unknown"]) == {"wl1": moved, "wl3": W3}
        assert await store.of([]) == {}


async def test_a_nodes_out_of_service_gpus_are_those_last_reported_draining_or_failed(
    subject: Subject,
) -> None:
    async with subject.units() as store:
        await store.set_health(gpu="g3", node="n1", health="failed")
        await store.set_health(gpu="g1", node="n1", health="draining")
        await store.set_health(gpu="g2", node="n1", health="healthy")
        await store.set_health(gpu="g4", node="n2", health="failed")
        await store.set_health(gpu="g5", node="n1", health="draining")
    async with subject.units() as store:
        await store.set_health(gpu="g5", node="n1", health="healthy")
        await store.set_health(gpu="g4", node="n1", health="draining")  # moved to n1
    async with subject.units() as store:
        assert await store.out_of_service_on_node("n1") == ["g1", "g3", "g4"]
        assert await store.out_of_service_on_node("n2") == []


async def test_placements_and_health_of_a_unit_of_work_that_does_not_commit_are_not_kept(
    subject: Subject,
) -> None:
    async with subject.units() as store:
        await store.place(W1, priority=1.0)
        await store.set_health(gpu="g1", node="n1", health="healthy")
    async with subject.units.rolled_back() as store:
        await store.place(W2, priority=2.0)
        await store.place(placement("wl1", "p1b", node="n2", gpus=("g4",)), priority=9.0)
        await store.end(workload_id="wl1", placement_id="p1")
        await store.set_health(gpu="g1", node="n1", health="failed")
        await store.set_health(gpu="g2", node="n1", health="draining")

    async with subject.units() as store:
        assert await store.on_node("n1") == [W1]
        assert await store.health_of(["g1", "g2"]) == {"g1": "healthy"}
    assert await subject.priorities() == {"wl1": 1.0}


async def test_a_current_placement_moves_onto_other_gpus_keeping_its_priority_and_an_old_one_does_not(
    subject: Subject,
) -> None:
    async with subject.units() as store:
        await store.place(placement("w1", "p2", node="n1", gpus=("g1", "g2")), priority=0.7)

    async with subject.units() as store:
        moved = await store.move(workload_id="w1", placement_id="p2", gpus=["g3", "g2"])
        assert await store.move(workload_id="w1", placement_id="p1", gpus=["g9"]) is None
        assert await store.move(workload_id="w-unknown", placement_id="p2", gpus=["g9"]) is None

    assert moved == placement("w1", "p2", node="n1", gpus=("g3", "g2"))
    async with subject.units() as store:
        assert await store.on_gpu("g3") == [moved]
        assert await store.on_gpu("g1") == []
    assert await subject.priorities() == {"w1": 0.7}
