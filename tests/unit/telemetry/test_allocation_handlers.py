from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

from libs.common.events.scheduler import (
    AllocationItem,
    WorkloadEndedV1,
    WorkloadPlacedV1,
    WorkloadReallocatedV1,
)
from libs.common.testing import handler_context
from services.telemetry.adapters.allocation_store_fake import FakeAllocationStore
from services.telemetry.adapters.unit_of_work_fake import FakeTelemetryUnitOfWork
from services.telemetry.domain.allocations import AllocationRow
from services.telemetry.service.handlers import on_workload_ended, on_workload_placed, on_workload_reallocated

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def _placed(placement_id: str, *gpus: str) -> WorkloadPlacedV1:
    allocations = [AllocationItem(gpu_uuid=g, units=Decimal(1), model="H100") for g in gpus]
    return WorkloadPlacedV1(
        workload_id="w1", tenant_id="t1", placement_id=placement_id, node="node-a",
        allocations=allocations, kind="job",
    )  # fmt: skip


async def _deliver(
    event: WorkloadPlacedV1 | WorkloadEndedV1, store: FakeAllocationStore, *, commit: bool = True
) -> None:
    uow = FakeTelemetryUnitOfWork(store)
    async with uow:
        ctx = handler_context(event, uow=uow, deps=None, time=T0)
        if isinstance(event, WorkloadPlacedV1):
            await on_workload_placed(event, ctx)
        else:
            await on_workload_ended(event, ctx)
        if commit:
            await uow.commit()


async def test_a_placement_holds_each_of_its_gpus_once_however_many_partitions_it_takes() -> None:
    store = FakeAllocationStore()

    await _deliver(_placed("p1", "gpu-b", "gpu-a", "gpu-b"), store)

    assert await store.allocations() == [
        AllocationRow("gpu-a", "w1", "t1", "node-a"),
        AllocationRow("gpu-b", "w1", "t1", "node-a"),
    ]


async def test_an_ended_placement_releases_its_gpus_and_leaves_other_placements_alone() -> None:
    store = FakeAllocationStore()
    await _deliver(_placed("p1", "gpu-a"), store)
    await _deliver(_placed("p2", "gpu-b"), store)

    await _deliver(
        WorkloadEndedV1(workload_id="w1", tenant_id="t1", placement_id="p1", outcome="completed"), store
    )

    assert await store.allocations() == [AllocationRow("gpu-b", "w1", "t1", "node-a")]


async def test_a_placement_or_end_whose_delivery_fails_before_its_commit_changes_no_allocation() -> None:
    store = FakeAllocationStore()
    await _deliver(_placed("p1", "gpu-a"), store)

    await _deliver(_placed("p2", "gpu-b"), store, commit=False)
    await _deliver(
        WorkloadEndedV1(workload_id="w1", tenant_id="t1", placement_id="p1", outcome="completed"),
        store,
        commit=False,
    )

    assert await store.allocations() == [AllocationRow("gpu-a", "w1", "t1", "node-a")]


async def test_a_reallocated_placement_holds_the_gpus_it_was_moved_onto() -> None:
    store = FakeAllocationStore()
    await _deliver(_placed("p1", "gpu-a", "gpu-b"), store)
    moved = WorkloadReallocatedV1(
        workload_id="w1",
        tenant_id="t1",
        placement_id="p1",
        node="node-a",
        allocations=[AllocationItem(gpu_uuid=g, units=Decimal(1), model="H100") for g in ("gpu-c", "gpu-b")],
        previous=[AllocationItem(gpu_uuid=g, units=Decimal(1), model="H100") for g in ("gpu-a", "gpu-b")],
    )
    uow = FakeTelemetryUnitOfWork(store)
    async with uow:
        await on_workload_reallocated(moved, handler_context(moved, uow=uow, deps=None, time=T0))
        await uow.commit()

    assert sorted(await store.allocations(), key=lambda r: r.gpu_uuid) == [
        AllocationRow("gpu-b", "w1", "t1", "node-a"),
        AllocationRow("gpu-c", "w1", "t1", "node-a"),
    ]
