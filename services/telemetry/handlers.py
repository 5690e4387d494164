"""Scheduler events -> the allocations table (labels samples, scopes tenants, finds a workload's GPUs)."""

from __future__ import annotations

from collections.abc import Mapping

from libs.common.bus.consumer import Handler, HandlerContext
from libs.common.events import Event
from libs.common.events.scheduler import WorkloadEndedV1, WorkloadPlacedV1
from services.telemetry.store import Store

__all__ = ["HANDLERS", "handle_workload_ended", "handle_workload_placed"]


async def handle_workload_placed(event: WorkloadPlacedV1, ctx: HandlerContext) -> None:
    await Store(ctx.uow.conn).add_allocations(
        placement_id=event.placement_id,
        workload_id=event.workload_id,
        tenant_id=event.tenant_id,
        node=event.node,
        placed_at=ctx.envelope.time,
        gpus=sorted({a.gpu_uuid for a in event.allocations}),
    )


async def handle_workload_ended(event: WorkloadEndedV1, ctx: HandlerContext) -> None:
    await Store(ctx.uow.conn).remove_placement(placement_id=event.placement_id)


HANDLERS: Mapping[type[Event], Handler] = {
    WorkloadPlacedV1: handle_workload_placed,
    WorkloadEndedV1: handle_workload_ended,
}
