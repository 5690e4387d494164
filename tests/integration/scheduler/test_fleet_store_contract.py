"""One contract for the fleet and fair-share writes of scheduler handlers: FakeFleetStore, FleetStore."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import asyncpg
import pytest

from services.scheduler.adapters.fleet_store_fake import FakeFleetStore, Stop
from services.scheduler.adapters.postgres import WAKE_CHANNEL
from services.scheduler.adapters.unit_of_work import PostgresSchedulerUnitOfWork
from services.scheduler.adapters.unit_of_work_fake import FakeSchedulerUnitOfWork
from services.scheduler.domain.rows import gpu_view
from services.scheduler.domain.stored import StoredGpu
from services.scheduler.service.unit_of_work import FleetWrites
from tests.integration.store_contract import Units, fake_units, service_pool, sql_units
from tests.integration.support import Isolation, eventually

pytestmark = pytest.mark.integration

T0 = datetime(2025, 3, 14, 9, 30, tzinfo=UTC)
#: The columns a GPU row has, as on_gpu_registered builds it.
GPU_COLUMNS = (
    "gpu_uuid, node, model, memory_bytes, units, health, labels, mig_enabled, time_slice_ratio, partitions"
)
SLICE = {
    "partition_id": "mig-0",
    "kind": "mig",
    "profile": "3g.40gb",
    "slot": 0,
    "units": "4",
    "memory_bytes": 40 << 30,
}


@dataclass(frozen=True, slots=True)
class Subject:
    units: Units[FleetWrites]
    gpus: Callable[[], Awaitable[dict[str, dict[str, Any]]]]
    usage: Callable[[], Awaitable[dict[str, tuple[float, datetime]]]]
    stops: Callable[[], Awaitable[list[Stop]]]  # by tenant, project and month
    #: Wake-ups of the placer delivered so far, once at least ``at_least`` arrived (the real one's are
    #: NOTIFYs, delivered in commit order, so waiting for the last committed one sees every earlier one).
    wakes: Callable[[int], Awaitable[int]]


def fake_subject() -> Subject:
    fake = FakeFleetStore()

    async def gpus() -> dict[str, dict[str, Any]]:
        return fake.gpus

    async def usage() -> dict[str, tuple[float, datetime]]:
        return fake.usage

    async def stops() -> list[Stop]:
        return sorted(fake.stops, key=lambda s: (s.tenant, s.project, s.month))

    async def wakes(at_least: int) -> int:
        return fake.wakes

    units = fake_units(FakeSchedulerUnitOfWork(fake), lambda uow: uow.fleet)
    return Subject(units=units, gpus=gpus, usage=usage, stops=stops, wakes=wakes)


def sql_subject(pool: asyncpg.Pool[Any], woken: list[str]) -> Subject:
    async def gpus() -> dict[str, dict[str, Any]]:
        rows = await pool.fetch(f"SELECT {GPU_COLUMNS} FROM gpus")
        return {r["gpu_uuid"]: dict(r) for r in rows}

    async def usage() -> dict[str, tuple[float, datetime]]:
        rows = await pool.fetch("SELECT tenant_id, decayed_unit_hours, as_of FROM tenant_usage")
        return {r["tenant_id"]: (r["decayed_unit_hours"], r["as_of"]) for r in rows}

    async def stops() -> list[Stop]:
        rows = await pool.fetch(
            "SELECT tenant_id, project, month, reason FROM budget_stops ORDER BY tenant_id, project, month"
        )
        return [Stop(r["tenant_id"], r["project"], r["month"], r["reason"]) for r in rows]

    async def wakes(at_least: int) -> int:
        async def arrived() -> int | None:
            return len(woken) if len(woken) >= at_least else None

        return await eventually(arrived, timeout=5.0, what=f"{at_least} wake-ups of the placer")

    units = sql_units(pool, PostgresSchedulerUnitOfWork, lambda uow: uow.fleet)
    return Subject(units=units, gpus=gpus, usage=usage, stops=stops, wakes=wakes)


@pytest.fixture(params=["fake", "postgres"])
async def subject(request: pytest.FixtureRequest, isolation: Isolation) -> AsyncIterator[Subject]:
    if request.param == "fake":
        yield fake_subject()
        return
    async with service_pool(isolation, "scheduler") as pool, pool.acquire() as listener:
        schema = await listener.fetchval("SELECT current_schema()")
        woken: list[str] = []

        def on_wake(_conn: object, _pid: int, _channel: str, payload: str) -> None:
            if payload == schema:
                woken.append(payload)

        await listener.add_listener(WAKE_CHANNEL, on_wake)
        try:
            yield sql_subject(pool, woken)
        finally:
            await listener.remove_listener(WAKE_CHANNEL, on_wake)


def gpu_row(uuid: str, **changes: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "gpu_uuid": uuid,
        "node": "n1",
        "model": "A100-80GB",
        "memory_bytes": 80 << 30,
        "units": Decimal("8"),
        "health": "healthy",
        "labels": {"zone": "z1"},
        "mig_enabled": False,
        "time_slice_ratio": 1,
        "partitions": [],
    }
    return row | changes


async def test_a_registered_gpu_is_recorded_and_registering_it_again_replaces_every_fact(
    subject: Subject,
) -> None:
    async with subject.units() as store:
        await store.upsert_gpu(row=gpu_row("g1"))
        await store.upsert_gpu(row=gpu_row("g2", units=Decimal("1.5")))
    assert await subject.gpus() == {"g1": gpu_row("g1"), "g2": gpu_row("g2", units=Decimal("1.5"))}

    moved = gpu_row(
        "g1",
        node="n2",
        model="H100-80GB",
        memory_bytes=81 << 30,
        units=Decimal("10"),
        health="draining",
        labels={},
        mig_enabled=True,
        time_slice_ratio=2,
        partitions=[SLICE],
    )
    async with subject.units() as store:
        await store.upsert_gpu(row=moved)
    assert await subject.gpus() == {"g1": moved, "g2": gpu_row("g2", units=Decimal("1.5"))}


async def test_new_partitions_replace_a_known_gpus_slices_and_an_unknown_gpu_stays_unknown(
    subject: Subject,
) -> None:
    async with subject.units() as store:
        await store.upsert_gpu(row=gpu_row("g1", mig_enabled=True, partitions=[SLICE]))
        await store.set_partitions("g1", mig_enabled=False, ratio=4, partitions=[])
        await store.set_partitions("g-unknown", mig_enabled=True, ratio=1, partitions=[SLICE])

    assert await subject.gpus() == {"g1": gpu_row("g1", time_slice_ratio=4)}


async def test_a_mig_partitions_device_uuid_is_recorded_and_read_back_with_its_partition(
    subject: Subject,
) -> None:
    named = SLICE | {"device_uuid": "MIG-4b1c"}
    renamed = SLICE | {"device_uuid": "MIG-9f0e"}
    async with subject.units() as store:
        await store.upsert_gpu(row=gpu_row("g1", mig_enabled=True, partitions=[named]))
        await store.upsert_gpu(row=gpu_row("g2", mig_enabled=True, partitions=[SLICE]))
        await store.set_partitions("g2", mig_enabled=True, ratio=1, partitions=[renamed])

    async with subject.units() as store:
        found = {g.gpu_uuid: gpu_view(g) for g in await store.node_gpus("n1")}

    assert [(p.id, p.device_uuid) for p in found["g1"].partitions] == [("mig-0", "MIG-4b1c")]
    assert [(p.id, p.device_uuid) for p in found["g2"].partitions] == [("mig-0", "MIG-9f0e")]
    assert (await subject.gpus())["g2"]["partitions"] == [renamed]


async def test_a_health_change_is_recorded_for_a_known_gpu_and_an_unknown_gpu_stays_unknown(
    subject: Subject,
) -> None:
    async with subject.units() as store:
        await store.upsert_gpu(row=gpu_row("g1"))
    async with subject.units() as store:
        await store.set_health("g1", health="failed")
        await store.set_health("g-unknown", health="failed")

    assert await subject.gpus() == {"g1": gpu_row("g1", health="failed")}


async def test_a_tenants_usage_is_replaced_by_the_latest_figure(subject: Subject) -> None:
    async with subject.units() as store:
        await store.set_usage("acme", value=99.0, as_of=T0)
        await store.set_usage("globex", value=1.25, as_of=T0)
    async with subject.units() as store:
        await store.set_usage("acme", value=12.5, as_of=T0 + timedelta(hours=1))

    assert await subject.usage() == {"acme": (12.5, T0 + timedelta(hours=1)), "globex": (1.25, T0)}


async def test_a_stop_is_kept_once_per_project_and_month_with_its_first_reason(subject: Subject) -> None:
    async with subject.units() as store:
        await store.add_stop(tenant="acme", project="vision", month="2025-03", reason="first")
    async with subject.units() as store:
        await store.add_stop(tenant="acme", project="vision", month="2025-03", reason="again")
        await store.add_stop(tenant="acme", project="vision", month="2025-04", reason="next month")
        await store.add_stop(tenant="acme", project="nlp", month="2025-03", reason="other project")
        await store.add_stop(tenant="globex", project="vision", month="2025-03", reason="other tenant")

    assert await subject.stops() == [
        Stop("acme", "nlp", "2025-03", "other project"),
        Stop("acme", "vision", "2025-03", "first"),
        Stop("acme", "vision", "2025-04", "next month"),
        Stop("globex", "vision", "2025-03", "other tenant"),
    ]


async def test_writes_of_a_unit_of_work_that_does_not_commit_are_not_kept(subject: Subject) -> None:
    async with subject.units() as store:
        await store.upsert_gpu(row=gpu_row("g1"))
        await store.set_usage("acme", value=1.0, as_of=T0)
    async with subject.units.rolled_back() as store:
        await store.upsert_gpu(row=gpu_row("g2"))
        await store.set_health("g1", health="failed")
        await store.set_usage("acme", value=50.0, as_of=T0 + timedelta(hours=1))
        await store.add_stop(tenant="acme", project="vision", month="2025-03", reason="rolled back")

    assert await subject.gpus() == {"g1": gpu_row("g1")}
    assert await subject.usage() == {"acme": (1.0, T0)}
    assert await subject.stops() == []


async def test_the_placer_is_woken_by_a_committed_step_and_not_by_one_that_rolls_back(
    subject: Subject,
) -> None:
    async with subject.units() as store:
        await store.wake_placer()
    assert await subject.wakes(1) == 1

    async with subject.units.rolled_back() as store:
        await store.wake_placer()
    async with subject.units() as store:
        await store.wake_placer()
        await store.wake_placer()  # one transaction's identical NOTIFYs arrive once

    assert await subject.wakes(2) == 2


async def test_a_nodes_gpus_read_back_as_recorded_in_uuid_order(subject: Subject) -> None:
    async with subject.units() as store:
        await store.upsert_gpu(row=gpu_row("g2", mig_enabled=True, partitions=[SLICE]))
        await store.upsert_gpu(row=gpu_row("g1"))
        await store.upsert_gpu(row=gpu_row("g3", node="n2"))

    async with subject.units() as store:
        found = await store.node_gpus("n1")
        assert await store.node_gpus("n-unknown") == []

    assert found == [
        StoredGpu(**gpu_row("g1")),
        StoredGpu(**gpu_row("g2", mig_enabled=True, partitions=[SLICE])),
    ]


async def test_registrations_and_changes_in_one_unit_of_work_apply_in_their_order(subject: Subject) -> None:
    async with subject.units() as store:
        await store.upsert_gpu(row=gpu_row("g1"))
        await store.upsert_gpu(row=gpu_row("g2", units=Decimal("4")))
        await store.set_health("g1", health="failed")
        await store.upsert_gpu(row=gpu_row("g2", units=Decimal("2")))
        await store.set_partitions("g2", mig_enabled=False, ratio=2, partitions=[])
        await store.upsert_gpu(row=gpu_row("g3", health="draining"))
        inside = {g.gpu_uuid: (g.health, g.units) for g in await store.node_gpus("n1")}

    assert inside == {
        "g1": ("failed", Decimal("8")),
        "g2": ("healthy", Decimal("2")),
        "g3": ("draining", Decimal("8")),
    }, "the unit of work reads its own registrations"
    assert await subject.gpus() == {
        "g1": gpu_row("g1", health="failed"),
        "g2": gpu_row("g2", units=Decimal("2"), time_slice_ratio=2),
        "g3": gpu_row("g3", health="draining"),
    }
