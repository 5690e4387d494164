"""Event handlers: node discovery, the scheduler's allocations and recovery's health requests.

Each handler runs inside the consumer's unit of work (the runner records the event id in the
inbox and commits). Times come from the envelope, so a replay computes the same state.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TypeAlias

from libs.common.bus.handlers import HandlerContext, Handlers
from libs.common.events.agent import NodeDiscoveredV1
from libs.common.events.recovery import DrainRequestedV1, ReturnToServiceRequestedV1
from libs.common.events.scheduler import (
    AllocationItem,
    WorkloadEndedV1,
    WorkloadPlacedV1,
    WorkloadReallocatedV1,
)
from services.inventory.adapters.node_store import AllocationRow
from services.inventory.adapters.unit_of_work import PostgresInventoryUnitOfWork
from services.inventory.domain.errors import ForbiddenTransitionError, UnknownGpuError
from services.inventory.domain.health import GpuHealth
from services.inventory.service.operations import UnitContext, change_health, change_node_health, register
from services.inventory.service.translate import (
    allocation_id,
    discovery_from_agent,
    drain_action,
    return_action,
)
from services.inventory.service.unit_of_work import InventoryUnitOfWork

__all__ = ["Context", "InventoryDeps", "handlers"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class InventoryDeps:
    """What the handlers need besides the unit of work: the catalog and unit basis."""

    units: UnitContext


#: What every handler of inventory gets: its deps and inventory's unit of work.
Context: TypeAlias = HandlerContext[InventoryDeps, InventoryUnitOfWork]


async def on_node_discovered(event: NodeDiscoveredV1, ctx: Context) -> None:
    discovery, skipped = discovery_from_agent(event=event, catalog=ctx.deps.units.catalog)
    if skipped:
        log.warning("node %s: skipped GPUs of models not in the catalog: %s", event.node, ", ".join(skipped))
    await register(
        uow=ctx.uow,
        discoveries=[discovery],
        units=ctx.deps.units,
        at=ctx.envelope.time,
        source=f"agent:{event.source}",
    )


async def on_workload_placed(event: WorkloadPlacedV1, ctx: Context) -> None:
    store = ctx.uow.ledger
    # A placement that already ended (events crossed) must not come back to life.
    if await store.placement_released(placement_id=event.placement_id):
        return
    for item in event.allocations:
        await store.add_allocation(row=_allocation_row(event, item), at=ctx.envelope.time)


def _allocation_row(event: WorkloadPlacedV1 | WorkloadReallocatedV1, item: AllocationItem) -> AllocationRow:
    return AllocationRow(
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


async def on_workload_reallocated(event: WorkloadReallocatedV1, ctx: Context) -> None:
    # Each item the placement gave up moves onto one it took, in order: its ledger row keeps when the
    # placement began to hold it (the host gave it these devices from the start).
    store = ctx.uow.ledger
    if await store.placement_released(placement_id=event.placement_id):
        return
    now = {(a.gpu_uuid, a.partition_id) for a in event.allocations}
    before = {(a.gpu_uuid, a.partition_id) for a in event.previous}
    gone = [a for a in event.previous if (a.gpu_uuid, a.partition_id) not in now]
    taken = [a for a in event.allocations if (a.gpu_uuid, a.partition_id) not in before]
    for old, new in zip(gone, taken, strict=False):
        old_id = allocation_id(
            placement_id=event.placement_id, gpu_uuid=old.gpu_uuid, partition_id=old.partition_id
        )
        await store.move_allocation(old_id=old_id, row=_allocation_row(event, new))


async def on_workload_ended(event: WorkloadEndedV1, ctx: Context) -> None:
    await ctx.uow.ledger.release_placement(placement_id=event.placement_id, at=ctx.envelope.time)


async def on_drain_requested(event: DrainRequestedV1, ctx: Context) -> None:
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


async def on_return_to_service_requested(event: ReturnToServiceRequestedV1, ctx: Context) -> None:
    inventory = await ctx.uow.nodes.load_node_of_gpu(gpu_uuid=event.gpu_uuid)
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


def handlers(deps: InventoryDeps) -> Handlers[InventoryDeps, PostgresInventoryUnitOfWork]:
    """The main consumer's handlers, bound to the catalog and unit basis of this process."""
    return (
        Handlers(deps, uow=PostgresInventoryUnitOfWork)
        .on(NodeDiscoveredV1, on_node_discovered)
        .on(WorkloadPlacedV1, on_workload_placed)
        .on(WorkloadEndedV1, on_workload_ended)
        .on(WorkloadReallocatedV1, on_workload_reallocated)
        .on(DrainRequestedV1, on_drain_requested)
        .on(ReturnToServiceRequestedV1, on_return_to_service_requested)
    )
