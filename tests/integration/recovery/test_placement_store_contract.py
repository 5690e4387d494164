"""One contract for the placement map and GPU health recovery's handlers keep: FakePlacementStore and
PlacementStore."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import asyncpg
import pytest

from services.recovery.adapters.placement_store import PlacementStore
from services.recovery.adapters.placement_store_fake import FakePlacementStore
from services.recovery.domain.placements import Placement
from services.recovery.service.handlers import PlacementMap
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

    return Subject(units=fake_units(fake), priorities=priorities)


def sql_subject(pool: asyncpg.Pool[Any]) -> Subject:
    async def priorities() -> dict[str, float]:
        rows = await pool.fetch("SELECT workload_id, priority FROM placements")
        return {r["workload_id"]: r["priority"] for r in rows}

    return Subject(units=sql_units(pool, lambda uow: PlacementStore(uow.conn)), priorities=priorities)


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
