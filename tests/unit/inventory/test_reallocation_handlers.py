"""A reallocated placement's ledger rows follow the devices it holds now (fake unit of work)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from libs.common.events.scheduler import (
    AllocationItem,
    WorkloadEndedV1,
    WorkloadPlacedV1,
    WorkloadReallocatedV1,
)
from libs.common.testing import handler_context
from services.inventory.adapters.node_store_fake import FakeNodeStore
from services.inventory.adapters.unit_of_work_fake import FakeInventoryUnitOfWork
from services.inventory.domain.catalog import Catalog
from services.inventory.domain.units import UnitBasis
from services.inventory.service.handlers import (
    InventoryDeps,
    on_workload_ended,
    on_workload_placed,
    on_workload_reallocated,
)
from services.inventory.service.operations import UnitContext

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def _item(gpu: str) -> AllocationItem:
    return AllocationItem(gpu_uuid=gpu, units=Decimal(8), model="H100")


PLACED = WorkloadPlacedV1(
    workload_id="w1",
    tenant_id="acme",
    placement_id="p1",
    node="node-a",
    kind="job",
    allocations=[_item("gpu-a"), _item("gpu-b")],
)
MOVED = WorkloadReallocatedV1(
    workload_id="w1",
    tenant_id="acme",
    placement_id="p1",
    node="node-a",
    allocations=[_item("gpu-c"), _item("gpu-b")],
    previous=[_item("gpu-a"), _item("gpu-b")],
)


async def _deliver(
    event: WorkloadPlacedV1 | WorkloadEndedV1 | WorkloadReallocatedV1,
    catalog: Catalog,
    store: FakeNodeStore,
    *,
    at: datetime,
) -> None:
    uow = FakeInventoryUnitOfWork(store)
    deps = InventoryDeps(units=UnitContext(catalog=catalog, basis=UnitBasis()))
    async with uow:
        ctx = handler_context(event, uow=uow, deps=deps, time=at)
        if isinstance(event, WorkloadPlacedV1):
            await on_workload_placed(event, ctx)
        elif isinstance(event, WorkloadReallocatedV1):
            await on_workload_reallocated(event, ctx)
        else:
            await on_workload_ended(event, ctx)
        await uow.commit()


async def test_a_reallocation_moves_the_allocation_it_gave_up_and_keeps_when_it_began(
    catalog: Catalog,
) -> None:
    store = FakeNodeStore()
    await _deliver(PLACED, catalog, store, at=T0)

    await _deliver(MOVED, catalog, store, at=T0 + timedelta(minutes=1))

    assert [(r.allocation_id, r.gpu_uuid) for r in store.live()] == [
        ("p1|gpu-c|-", "gpu-c"),
        ("p1|gpu-b|-", "gpu-b"),
    ]
    assert {at for _row, at in store.allocations.values()} == {T0}


async def test_a_reallocation_of_an_ended_placement_changes_nothing(catalog: Catalog) -> None:
    store = FakeNodeStore()
    await _deliver(PLACED, catalog, store, at=T0)
    ended = WorkloadEndedV1(workload_id="w1", tenant_id="acme", placement_id="p1", outcome="completed")
    await _deliver(ended, catalog, store, at=T0 + timedelta(minutes=1))

    await _deliver(MOVED, catalog, store, at=T0 + timedelta(minutes=2))

    assert store.live() == []
    assert set(store.allocations) == {"p1|gpu-a|-", "p1|gpu-b|-"}
