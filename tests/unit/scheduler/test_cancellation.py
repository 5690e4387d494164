"""Cancelling runs on the scheduler's fake unit of work: the placement and the workload end, once."""

from __future__ import annotations

import pytest

from libs.common.events.scheduler import WorkloadEndedV1
from libs.common.http.errors import Conflict, NotFound
from services.scheduler.adapters.unit_of_work_fake import FakeSchedulerUnitOfWork
from services.scheduler.service.cancellation import cancel
from tests.unit.scheduler.test_run_handlers import T0, placed


async def test_cancelling_a_placed_workload_ends_its_placement_and_says_so_once() -> None:
    uow = FakeSchedulerUnitOfWork()
    await placed(uow)

    await cancel(uow, "w1", tenant="acme", now=T0)

    ended = [e for e in uow.events if isinstance(e, WorkloadEndedV1)]
    assert [(e.workload_id, e.placement_id, e.outcome, e.ended_at) for e in ended] == [
        ("w1", "p1", "cancelled", T0)
    ]
    async with uow:
        workload = await uow.workloads.lock_workload("w1")
        assert workload is not None
        assert (workload.state, workload.ended_at) == ("cancelled", T0)
        assert await uow.workloads.live_placement_of("w1") is None
    with pytest.raises(Conflict, match="already ended"):
        await cancel(uow, "w1", tenant="acme", now=T0)
    assert len([e for e in uow.events if isinstance(e, WorkloadEndedV1)]) == 1


async def test_another_tenants_workload_is_not_found_and_nothing_changes() -> None:
    uow = FakeSchedulerUnitOfWork()
    await placed(uow)

    with pytest.raises(NotFound):
        await cancel(uow, "w1", tenant="globex", now=T0)

    assert uow.events == []
    async with uow:
        workload = await uow.workloads.lock_workload("w1")
        assert workload is not None
        assert workload.state == "placed"
