"""The scheduler's unit of work for unit tests: in-memory events, fleet and workloads, rolled back unless
committed.

The fleet is a ``FakeFleetStore`` and the workloads a ``FakeWorkloadStore`` (held to ``FleetStore`` and
``WorkloadStore`` by tests/integration/scheduler/test_fleet_store_contract.py and
test_workload_store_contract.py); the workloads read tenant usage from that fleet. The draft and tenant
stores are SQL only: asked for without a connection they raise, so a use case that needs them is tested
against Postgres.
"""

from __future__ import annotations

from typing import Any

from libs.common.testing import FakeUnitOfWork
from services.scheduler.adapters.fleet_store_fake import FakeFleetStore
from services.scheduler.adapters.unit_of_work import SqlOnlyStores
from services.scheduler.adapters.workload_store_fake import FakeWorkloadStore

__all__ = ["FakeSchedulerUnitOfWork"]


class FakeSchedulerUnitOfWork(FakeUnitOfWork, SqlOnlyStores):
    """Events, the fleet and the workloads in memory; ``fleet`` and ``workloads`` keep what committed
    blocks wrote."""

    def __init__(
        self,
        fleet: FakeFleetStore | None = None,
        *,
        workloads: FakeWorkloadStore | None = None,
        conn: Any = None,
    ) -> None:
        self.fleet = fleet or FakeFleetStore()
        self.workloads = workloads or FakeWorkloadStore(self.fleet)
        super().__init__(conn, tracked=[self.fleet, self.workloads])

    async def commit(self) -> None:
        await super().commit()
        for store in (self.fleet, self.workloads):
            if store.wake_pending:  # delivered at commit, once per transaction and store
                store.wakes += 1
                store.wake_pending = False
