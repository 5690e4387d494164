"""Scheduler events -> the allocations table (labels samples, scopes tenants, finds a workload's GPUs)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from libs.common.bus.handlers import HandlerContext, Handlers
from libs.common.db.uow import UnitOfWork
from libs.common.events.scheduler import WorkloadEndedV1, WorkloadPlacedV1
from services.telemetry.adapters.allocation_store import AllocationStore

__all__ = ["AllocationWriter", "TelemetryDeps", "handlers", "on_workload_ended", "on_workload_placed"]


class AllocationWriter(Protocol):
    """The allocation writes the handlers make (AllocationStore; FakeAllocationStore in unit tests)."""

    async def add_allocations(
        self,
        *,
        placement_id: str,
        workload_id: str,
        tenant_id: str,
        node: str,
        placed_at: datetime,
        gpus: Sequence[str],
    ) -> None: ...

    async def remove_placement(self, *, placement_id: str) -> None: ...


def _sql_allocations(uow: UnitOfWork) -> AllocationWriter:
    return AllocationStore(uow.conn)


@dataclass(frozen=True, slots=True, kw_only=True)
class TelemetryDeps:
    """What the handlers need besides the unit of work: the allocation store of a unit of work."""

    allocations: Callable[[UnitOfWork], AllocationWriter] = _sql_allocations


async def on_workload_placed(event: WorkloadPlacedV1, ctx: HandlerContext[TelemetryDeps]) -> None:
    await ctx.deps.allocations(ctx.uow).add_allocations(
        placement_id=event.placement_id,
        workload_id=event.workload_id,
        tenant_id=event.tenant_id,
        node=event.node,
        placed_at=ctx.envelope.time,
        gpus=sorted({a.gpu_uuid for a in event.allocations}),
    )


async def on_workload_ended(event: WorkloadEndedV1, ctx: HandlerContext[TelemetryDeps]) -> None:
    await ctx.deps.allocations(ctx.uow).remove_placement(placement_id=event.placement_id)


def handlers(deps: TelemetryDeps) -> Handlers[TelemetryDeps]:
    """The allocations consumer's handlers."""
    return Handlers(deps).on(WorkloadPlacedV1, on_workload_placed).on(WorkloadEndedV1, on_workload_ended)
