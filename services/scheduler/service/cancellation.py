"""Cancelling a workload: its placement and the workload ended, the event emitted, the placer woken."""

from __future__ import annotations

from datetime import datetime

from libs.common.events.scheduler import WorkloadEndedV1
from libs.common.http.errors import Conflict, NotFound
from services.scheduler.service.unit_of_work import SchedulerUnitOfWork

__all__ = ["cancel"]


async def cancel(uow: SchedulerUnitOfWork, workload_id: str, *, tenant: str | None, now: datetime) -> None:
    """End a workload the caller (``tenant``; None = any) may see, in the unit of work ``uow`` (opened and
    committed here)."""
    async with uow:
        store = uow.workloads
        row = await store.lock_workload(workload_id)
        if row is None or (tenant is not None and row.tenant_id != tenant):
            raise NotFound(f"no workload {workload_id!r}", field="workload_id")
        if row.state in ("completed", "failed", "cancelled"):
            raise Conflict(f"workload {workload_id!r} already ended ({row.state})", field="workload_id")
        pid = row.placement_id or ""
        if pid:
            await store.end_placement(pid, outcome="cancelled", at=now)
        await store.end_workload(
            workload_id, state="cancelled", outcome="cancelled", reason="cancelled by caller", at=now
        )
        ended = WorkloadEndedV1(
            workload_id=workload_id,
            tenant_id=row.tenant_id,
            placement_id=pid,
            outcome="cancelled",
            reason="cancelled by caller",
            ended_at=now,  # the instant stored as the workload's end: billing charges to it
        )
        await uow.emit(ended, tenant=row.tenant_id, time=now)
        await store.wake_placer()
        await uow.commit()
