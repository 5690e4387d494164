"""The fleet handlers run on the scheduler's fake unit of work: GPUs recorded, the placer woken at commit."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from libs.common.events.inventory import GpuHealthChangedV1, GpuRegisteredV1
from libs.common.testing import handler_context
from services.scheduler.adapters.unit_of_work_fake import FakeSchedulerUnitOfWork
from services.scheduler.service.handlers import SchedulerDeps, on_gpu_health_changed, on_gpu_registered

DEPS = SchedulerDeps(half_life=timedelta(days=7))


def _registered(uuid: str) -> GpuRegisteredV1:
    return GpuRegisteredV1(
        gpu_uuid=uuid,
        node="n1",
        index=0,
        model="A100-80GB",
        memory_bytes=80 << 30,
        units=Decimal("8"),
        labels={"zone": "z1"},
    )


async def test_a_registered_gpu_is_recorded_and_wakes_the_placer_once_committed() -> None:
    uow = FakeSchedulerUnitOfWork()
    event = _registered("g1")

    async with uow:
        await on_gpu_registered(event, handler_context(event, uow=uow, deps=DEPS))
        await uow.commit()

    assert uow.fleet.gpus["g1"] == {
        "gpu_uuid": "g1",
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
    assert uow.fleet.wakes == 1


async def test_a_health_change_of_a_delivery_that_does_not_commit_neither_sticks_nor_wakes() -> None:
    uow = FakeSchedulerUnitOfWork()
    registered = _registered("g1")
    async with uow:
        await on_gpu_registered(registered, handler_context(registered, uow=uow, deps=DEPS))
        await uow.commit()
    failed = GpuHealthChangedV1(
        gpu_uuid="g1", node="n1", previous="healthy", health="failed", reason="xid 79"
    )

    async with uow:
        await on_gpu_health_changed(failed, handler_context(failed, uow=uow, deps=DEPS))

    assert uow.fleet.gpus["g1"]["health"] == "healthy"
    assert uow.fleet.wakes == 1
