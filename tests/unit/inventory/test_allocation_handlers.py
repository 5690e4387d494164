from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from libs.common.events.scheduler import AllocationItem, WorkloadEndedV1, WorkloadPlacedV1
from libs.common.testing import handler_context
from services.inventory.adapters.node_store import AllocationRow
from services.inventory.adapters.node_store_fake import FakeNodeStore
from services.inventory.adapters.unit_of_work_fake import FakeInventoryUnitOfWork
from services.inventory.domain.catalog import Catalog
from services.inventory.domain.units import UnitBasis
from services.inventory.service.handlers import InventoryDeps, on_workload_ended, on_workload_placed
from services.inventory.service.operations import UnitContext

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)

PLACED = WorkloadPlacedV1(
    workload_id="w1",
    tenant_id="acme",
    placement_id="p1",
    node="node-a",
    kind="job",
    allocations=[
        AllocationItem(gpu_uuid="gpu-a", units=Decimal(1), model="H100"),
        AllocationItem(gpu_uuid="gpu-b", partition_id="mig-1", units=Decimal("0.25"), model="H100"),
    ],
)
ENDED = WorkloadEndedV1(workload_id="w1", tenant_id="acme", placement_id="p1", outcome="completed")


def _deps(catalog: Catalog) -> InventoryDeps:
    return InventoryDeps(units=UnitContext(catalog=catalog, basis=UnitBasis()))


async def _deliver(
    event: WorkloadPlacedV1 | WorkloadEndedV1,
    deps: InventoryDeps,
    *,
    at: datetime,
    store: FakeNodeStore,
    commit: bool = True,
) -> None:
    uow = FakeInventoryUnitOfWork(store)
    async with uow:
        ctx = handler_context(event, uow=uow, deps=deps, time=at)
        if isinstance(event, WorkloadPlacedV1):
            await on_workload_placed(event, ctx)
        else:
            await on_workload_ended(event, ctx)
        if commit:
            await uow.commit()


async def test_a_placement_records_one_allocation_per_gpu_and_partition_it_holds(catalog: Catalog) -> None:
    store = FakeNodeStore()

    await _deliver(PLACED, _deps(catalog), at=T0, store=store)

    assert store.live() == [
        AllocationRow(
            allocation_id="p1|gpu-a|-", placement_id="p1", workload_id="w1", tenant_id="acme",
            gpu_uuid="gpu-a", partition_id=None, units=Decimal(1),
        ),
        AllocationRow(
            allocation_id="p1|gpu-b|mig-1", placement_id="p1", workload_id="w1", tenant_id="acme",
            gpu_uuid="gpu-b", partition_id="mig-1", units=Decimal("0.25"),
        ),
    ]  # fmt: skip


async def test_a_placement_whose_end_arrived_first_does_not_come_back_to_life(catalog: Catalog) -> None:
    store = FakeNodeStore()
    deps = _deps(catalog)

    await _deliver(ENDED, deps, at=T0, store=store)
    await _deliver(PLACED, deps, at=T0 + timedelta(seconds=1), store=store)

    assert store.live() == []
    assert store.released == {"p1": T0}


async def test_the_allocations_and_release_of_deliveries_that_fail_before_their_commit_are_not_kept(
    catalog: Catalog,
) -> None:
    store = FakeNodeStore()
    deps = _deps(catalog)
    await _deliver(PLACED, deps, at=T0, store=store)

    await _deliver(ENDED, deps, at=T0 + timedelta(seconds=1), store=store, commit=False)
    await _deliver(PLACED.model_copy(update={"placement_id": "p2"}), deps, at=T0, store=store, commit=False)

    assert [row.placement_id for row in store.live()] == ["p1", "p1"]
    assert store.released == {}
