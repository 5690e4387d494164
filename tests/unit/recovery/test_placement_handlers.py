from __future__ import annotations

from libs.common.events.alerting import AlertFiredV1
from libs.common.events.inventory import GpuHealthChangedV1
from libs.common.events.scheduler import WorkloadEndedV1
from libs.common.testing import FakeUnitOfWork, handler_context
from services.recovery.adapters.placement_store_fake import FakePlacementStore
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


def _deps(catalog: FaultCatalog, store: FakePlacementStore) -> RecoveryDeps:
    # FakeUnitOfWork has no connection: a handler that reached for SQL would fail the test.
    return RecoveryDeps(
        settings=RecoverySettings(), catalog=catalog, clock=lambda: T0, placements=lambda _uow: store
    )


async def test_a_gpu_that_stays_in_service_has_its_health_recorded_and_moves_nothing(
    catalog: FaultCatalog,
) -> None:
    store, uow = FakePlacementStore(), FakeUnitOfWork()
    await store.place(PLACED, priority=1.0)
    event = GpuHealthChangedV1(
        gpu_uuid="gpu-a", node="node-a", previous="healthy", health="degraded", reason="ecc"
    )

    async with uow:
        await on_gpu_health_changed(event, handler_context(event, uow=uow, deps=_deps(catalog, store)))
        await uow.commit()

    assert store.health == {"gpu-a": ("node-a", "degraded")}
    assert await store.on_gpu("gpu-a") == [PLACED]
    assert uow.events == []


async def test_the_end_of_an_older_placement_keeps_the_workloads_current_one(catalog: FaultCatalog) -> None:
    store, uow = FakePlacementStore(), FakeUnitOfWork()
    await store.place(PLACED, priority=1.0)
    event = WorkloadEndedV1(workload_id="w1", tenant_id="acme", placement_id="p1", outcome="migrated")

    async with uow:
        await on_workload_ended(event, handler_context(event, uow=uow, deps=_deps(catalog, store)))
        await uow.commit()

    assert await store.on_node("node-a") == [PLACED]


async def test_an_alert_that_is_only_a_symptom_opens_no_incident(catalog: FaultCatalog) -> None:
    store, uow = FakePlacementStore(), FakeUnitOfWork()
    event = AlertFiredV1(
        fingerprint="f1", rule="GpuHot", severity="warning", labels={"node": "node-a"}, starts_at=T0
    )

    async with uow:
        await on_alert_fired(event, handler_context(event, uow=uow, deps=_deps(catalog, store)))
        await uow.commit()

    assert uow.events == []
