"""The host's notes on a start (memory not isolated, restarted from the start) show in the workload's view."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from libs.common.events.agent import WorkloadStartedV1
from libs.common.testing import handler_context
from services.scheduler.adapters.unit_of_work_fake import FakeSchedulerUnitOfWork
from services.scheduler.api.schemas import WorkloadOut
from services.scheduler.service.handlers import SchedulerDeps, on_workload_started
from tests.unit.scheduler.test_run_handlers import placed

T0 = datetime(2025, 3, 14, 9, 30, tzinfo=UTC)
DEPS = SchedulerDeps(half_life=timedelta(days=7))
IDS: Any = {"workload_id": "w1", "tenant_id": "acme", "placement_id": "p1", "node": "n1"}
SHARED = "memory not isolated: a time-sliced share without an MPS control daemon on this host"


async def _started(event: WorkloadStartedV1) -> WorkloadOut:
    uow = FakeSchedulerUnitOfWork()
    await placed(uow)
    async with uow:
        await on_workload_started(event, handler_context(event, uow=uow, deps=DEPS, time=T0))
        await uow.commit()
    return WorkloadOut.of(uow.workloads.workloads["w1"])


async def test_the_hosts_notes_show_in_the_workloads_host_view_as_said() -> None:
    notes = [SHARED, "no CPU or memory limit asked"]
    shown = await _started(WorkloadStartedV1(**IDS, pid=4242, runner="process", notes=notes, at=T0))
    assert shown.state == "running"
    assert shown.host is not None
    assert shown.host.notes == notes
    assert WorkloadOut.model_validate_json(shown.model_dump_json()).host == shown.host


async def test_a_start_from_an_agent_before_notes_shows_none() -> None:
    shown = await _started(WorkloadStartedV1(**IDS, pid=4242, runner="process", at=T0))
    assert shown.host is not None
    assert shown.host.notes == []
