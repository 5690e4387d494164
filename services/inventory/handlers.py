"""Event handlers: node discovery, the scheduler's allocations and recovery's health requests.

Each handler runs inside the consumer's unit of work (the runner records the event id in the
inbox and commits). Times come from the envelope, so a replay computes the same state.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from libs.common.bus.consumer import Handler, HandlerContext
from libs.common.events import Event
from libs.common.events.agent import NodeDiscoveredV1
from libs.common.events.recovery import DrainRequestedV1, ReturnToServiceRequestedV1
from libs.common.events.scheduler import WorkloadEndedV1, WorkloadPlacedV1
from services.inventory.errors import ForbiddenTransitionError, UnknownGpuError
from services.inventory.health import GpuHealth
from services.inventory.operations import UnitContext, change_health, change_node_health, register
from services.inventory.store import AllocationRow, Store
from services.inventory.translate import allocation_id, discovery_from_agent, drain_action, return_action

__all__ = ["make_handlers"]

log = logging.getLogger(__name__)


async def handle_node_discovered(event: NodeDiscoveredV1, ctx: HandlerContext, units: UnitContext) -> None:
    discovery, skipped = discovery_from_agent(event=event, catalog=units.catalog)
    if skipped:
        log.warning("node %s: skipped GPUs of models not in the catalog: %s", event.node, ", ".join(skipped))
    await register(
        uow=ctx.uow,
        discoveries=[discovery],
        units=units,
        at=ctx.envelope.time,
        source=f"agent:{event.source}",
    )


async def handle_workload_placed(event: WorkloadPlacedV1, ctx: HandlerContext, units: UnitContext) -> None:
    store = Store(ctx.uow.conn)
    # A placement that already ended (events crossed) must not come back to life.
    if await store.placement_released(placement_id=event.placement_id):
        return
    for item in event.allocations:
        row = AllocationRow(
            allocation_id=allocation_id(
                placement_id=event.placement_id, gpu_uuid=item.gpu_uuid, partition_id=item.partition_id
            ),
            placement_id=event.placement_id,
            workload_id=event.workload_id,
            tenant_id=event.tenant_id,
            gpu_uuid=item.gpu_uuid,
            partition_id=item.partition_id,
            units=item.units,
        )
        await store.add_allocation(row=row, at=ctx.envelope.time)


async def handle_workload_ended(event: WorkloadEndedV1, ctx: HandlerContext, units: UnitContext) -> None:
    await Store(ctx.uow.conn).release_placement(placement_id=event.placement_id, at=ctx.envelope.time)


async def handle_drain_requested(event: DrainRequestedV1, ctx: HandlerContext, units: UnitContext) -> None:
    action = drain_action(event.target)
    reason = f"{event.reason} (incident {event.incident_id})"
    if event.gpu_uuid is None:
        await change_node_health(
            uow=ctx.uow,
            hostname=event.node,
            action=action,
            reason=reason,
            at=ctx.envelope.time,
            source="recovery",
        )
        return
    try:
        await change_health(
            uow=ctx.uow,
            gpu_uuid=event.gpu_uuid,
            action=action,
            reason=reason,
            at=ctx.envelope.time,
            source="recovery",
        )
    except (UnknownGpuError, ForbiddenTransitionError) as error:
        # Not retryable: the request no longer applies (unknown GPU, already failed...).
        log.warning("drain request of incident %s ignored: %s", event.incident_id, error)


async def handle_return_requested(
    event: ReturnToServiceRequestedV1, ctx: HandlerContext, units: UnitContext
) -> None:
    store = Store(ctx.uow.conn)
    inventory = await store.load_node_of_gpu(gpu_uuid=event.gpu_uuid)
    gpu = inventory.gpu(event.gpu_uuid) if inventory else None
    action = return_action(GpuHealth(gpu.health)) if gpu else None
    if action is None:
        return
    reason = f"returned to service (incident {event.incident_id})"
    await change_health(
        uow=ctx.uow,
        gpu_uuid=event.gpu_uuid,
        action=action,
        reason=reason,
        at=ctx.envelope.time,
        source="recovery",
    )


_Bound = Callable[[Any, HandlerContext, UnitContext], Awaitable[None]]
_TABLE: Mapping[type[Event], _Bound] = {
    NodeDiscoveredV1: handle_node_discovered,
    WorkloadPlacedV1: handle_workload_placed,
    WorkloadEndedV1: handle_workload_ended,
    DrainRequestedV1: handle_drain_requested,
    ReturnToServiceRequestedV1: handle_return_requested,
}


def _bind(handler: _Bound, units: UnitContext) -> Handler:
    async def bound(event: Any, ctx: HandlerContext) -> None:
        await handler(event, ctx, units)

    return bound


def make_handlers(*, units: UnitContext) -> dict[type[Event], Handler]:
    """The handler table, bound to the catalog and unit basis of this process."""
    return {cls: _bind(handler, units) for cls, handler in _TABLE.items()}
