"""asyncpg SQL for workloads and their placements; takes a connection and never commits.

One class, ``WorkloadStore``, made of one part per table family: the workloads (``_workloads``), the
placements and their held slots (``_placements``) and the agent's run reports (``_runs``).
"""

from __future__ import annotations

from services.scheduler.adapters.workload_store._base import WAKE_CHANNEL
from services.scheduler.adapters.workload_store._placements import PlacementRows
from services.scheduler.adapters.workload_store._runs import RunRows
from services.scheduler.adapters.workload_store._workloads import WorkloadRows

__all__ = ["WAKE_CHANNEL", "WorkloadStore"]


class WorkloadStore(WorkloadRows, PlacementRows, RunRows):
    """Workload and placement rows on one connection (or the pool, for reads)."""
