"""The scheduling pass: `schedule(queue, state, now=..., config=...) -> Decisions`.

Work is considered in priority order. Each workload is placed best-fit if it fits, the reserved pool admits
it and its tenant's quota allows it; otherwise it waits with a reason. The first workload blocked by capacity
gets an EASY-backfill reservation; high-priority blocked work may propose preemptions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from services.scheduler.domain.cluster import ClusterState
from services.scheduler.domain.decisions import (
    Decisions,
    Placement,
    QueueEntry,
    QueuePosition,
    SchedulerConfig,
    WaitReason,
    order_queue,
)
from services.scheduler.domain.index import FreeIndex
from services.scheduler.domain.quota import QuotaLimits
from services.scheduler.domain.schedule_pass import SchedulePass

__all__ = [
    "Decisions",
    "Placement",
    "QueueEntry",
    "QueuePosition",
    "SchedulerConfig",
    "WaitReason",
    "order_queue",
    "schedule",
]


def schedule(
    queue: Sequence[QueueEntry],
    state: ClusterState,
    *,
    now: datetime,
    config: SchedulerConfig | None = None,
    quotas: Mapping[str, QuotaLimits] | None = None,
    base_index: FreeIndex | None = None,
) -> Decisions:
    """Decide placements, queue positions and preemptions for one pass; pure and deterministic.

    ``base_index``: the free index of ``state.gpus`` with nothing held, kept by the caller between passes
    while the GPUs stay the same (copied rather than rebuilt; the decisions are the same).
    """
    run = SchedulePass(
        state=state, now=now, config=config or SchedulerConfig(), quotas=quotas or {}, base_index=base_index
    )
    return run.run(order_queue(queue))
