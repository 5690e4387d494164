"""Scheduler events -> the allocations table (labels samples, scopes tenants, finds a workload's GPUs)."""

from __future__ import annotations

from typing import TypeAlias

from libs.common.bus.handlers import HandlerContext, Handlers
from libs.common.events.scheduler import WorkloadEndedV1, WorkloadPlacedV1, WorkloadReallocatedV1
from services.telemetry.adapters.unit_of_work import PostgresTelemetryUnitOfWork
from services.telemetry.service.unit_of_work import TelemetryUnitOfWork

__all__ = ["Context", "handlers", "on_workload_ended", "on_workload_placed", "on_workload_reallocated"]

#: What every handler of telemetry gets: no deps, telemetry's unit of work.
Context: TypeAlias = HandlerContext[None, TelemetryUnitOfWork]


async def on_workload_placed(event: WorkloadPlacedV1, ctx: Context) -> None:
    await ctx.uow.allocations.add_allocations(
        placement_id=event.placement_id,
        workload_id=event.workload_id,
        tenant_id=event.tenant_id,
        node=event.node,
        placed_at=ctx.envelope.time,
        gpus=sorted({a.gpu_uuid for a in event.allocations}),
    )


async def on_workload_reallocated(event: WorkloadReallocatedV1, ctx: Context) -> None:
    await ctx.uow.allocations.move_placement(
        placement_id=event.placement_id, gpus=sorted({a.gpu_uuid for a in event.allocations})
    )


async def on_workload_ended(event: WorkloadEndedV1, ctx: Context) -> None:
    await ctx.uow.allocations.remove_placement(placement_id=event.placement_id)


def handlers() -> Handlers[None, PostgresTelemetryUnitOfWork]:
    """The allocations consumer's handlers."""
    return (
        Handlers(None, uow=PostgresTelemetryUnitOfWork)
        .on(WorkloadPlacedV1, on_workload_placed)
        .on(WorkloadEndedV1, on_workload_ended)
        .on(WorkloadReallocatedV1, on_workload_reallocated)
    )
