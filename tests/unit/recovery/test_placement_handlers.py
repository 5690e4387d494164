from __future__ import annotations

from libs.common.events.alerting import AlertFiredV1
from libs.common.events.inventory import GpuHealthChangedV1
from libs.common.events.scheduler import WorkloadEndedV1
from libs.common.testing import handler_context
from services.recovery.adapters.placement_store_fake import FakePlacementStore
from services.recovery.adapters.unit_of_work_fake import FakeRecoveryUnitOfWork
from services.recovery.domain.catalog import FaultCatalog
from services.recovery.domain.placements import Placement
from services.recovery.service.handlers import (
    RecoveryDeps,
    on_alert_fired,
    on_gpu_health_changed,
    on_workload_ended,
)
from services.recovery.settings import RecoverySettings
from tests.unit.recovery.conftest import T0

PLACED = Placement(workload_id="w1", tenant_id="acme", placement_id="p2", node="node-a", gpus=("gpu-a",))


def _deps(catalog: FaultCatalog) -> RecoveryDeps:
    return RecoveryDeps(settings=RecoverySettings(), catalog=catalog, clock=lambda: T0)


def _uow(store: FakePlacementStore) -> FakeRecoveryUnitOfWork:
    # Its incidents are in memory and none is open: these handlers act on the placement map alone.
    return FakeRecoveryUnitOfWork(store)


async def test_a_gpu_that_stays_in_service_has_its_health_recorded_and_moves_nothing(
    catalog: FaultCatalog,
) -> None:
    store = FakePlacementStore()
    uow = _uow(store)
    await store.place(PLACED, priority=1.0)
    event = GpuHealthChangedV1(
        gpu_uuid="gpu-a", node="node-a", previous="healthy", health="degraded", reason="ecc"
    )

    async with uow:
        await on_gpu_health_changed(event, handler_context(event, uow=uow, deps=_deps(catalog)))
        await uow.commit()

    assert store.health == {"gpu-a": ("node-a", "degraded")}
    assert await store.on_gpu("gpu-a") == [PLACED]
    assert uow.events == []


async def test_the_end_of_an_older_placement_keeps_the_workloads_current_one(catalog: FaultCatalog) -> None:
    store = FakePlacementStore()
    uow = _uow(store)
    await store.place(PLACED, priority=1.0)
    event = WorkloadEndedV1(workload_id="w1", tenant_id="acme", placement_id="p1", outcome="migrated")

    async with uow:
        await on_workload_ended(event, handler_context(event, uow=uow, deps=_deps(catalog)))
        await uow.commit()

    assert await store.on_node("node-a") == [PLACED]


async def test_an_alert_that_is_only_a_symptom_opens_no_incident(catalog: FaultCatalog) -> None:
    store = FakePlacementStore()
    uow = _uow(store)
    event = AlertFiredV1(
        fingerprint="f1", rule="GpuHot", severity="warning", labels={"node": "node-a"}, starts_at=T0
    )

    async with uow:
        await on_alert_fired(event, handler_context(event, uow=uow, deps=_deps(catalog)))
        await uow.commit()

    assert uow.events == []


async def test_the_health_and_end_recorded_by_deliveries_that_fail_before_their_commit_are_not_kept(
    catalog: FaultCatalog,
) -> None:
    store = FakePlacementStore()
    await store.place(PLACED, priority=1.0)
    uow = _uow(store)
    health = GpuHealthChangedV1(
        gpu_uuid="gpu-a", node="node-a", previous="healthy", health="degraded", reason="ecc"
    )
    ended = WorkloadEndedV1(workload_id="w1", tenant_id="acme", placement_id="p2", outcome="completed")

    async with uow:
        await on_gpu_health_changed(health, handler_context(health, uow=uow, deps=_deps(catalog)))
    async with uow:
        await on_workload_ended(ended, handler_context(ended, uow=uow, deps=_deps(catalog)))

    assert store.health == {}
    assert await store.on_node("node-a") == [PLACED]
    assert store.priorities == {"w1": 1.0}
