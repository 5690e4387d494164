"""Billing's unit of work: one transaction and the stores that read and write inside it.

Use cases and handlers take ``BillingUnitOfWork`` and reach their stores as ``uow.allocations``,
``uow.ledger``, ...; ``adapters/unit_of_work.py`` opens the Postgres one (``billing_uow`` below, on the
runtime's pool), ``adapters/unit_of_work_fake.py`` the in-memory one a unit test passes. Each store's
fake is held to its real twin by a contract test in tests/integration/billing/.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Protocol

from libs.common.db.uow import UnitOfWork
from libs.common.runtime import ServiceRuntime
from services.billing.adapters.allocation_store import AllocationRow
from services.billing.adapters.unit_of_work import PostgresBillingUnitOfWork
from services.billing.domain.budgets import Budget, BudgetState
from services.billing.domain.entry_records import EntryRecord
from services.billing.domain.host_facts import HostFact
from services.billing.domain.idle import IdleState
from services.billing.domain.prices import PriceEntry, PriceList
from services.billing.domain.rating import Allocation, EndReason
from services.billing.domain.sla import CreditDecision, Incident, SlaPolicy, WorkloadMove

__all__ = [
    "AllocationWrites",
    "BillingUnitOfWork",
    "BudgetWrites",
    "LedgerWrites",
    "PolicyWrites",
    "PriceWrites",
    "SlaWrites",
    "billing_uow",
]


class AllocationWrites(Protocol):
    """Allocations, their lifecycle facts, the hosts' facts and idle state (AllocationStore;
    FakeAllocationStore)."""

    async def open_allocation(self, *, allocation: Allocation, placement_id: str, kind: str) -> bool: ...

    async def start_placement(self, placement_id: str, *, at: datetime) -> list[str]: ...

    async def lock_placement(self, placement_id: str) -> list[AllocationRow]: ...

    async def lock_open_of_workload(self, workload_id: str) -> list[AllocationRow]: ...

    async def lock_due(self, *, before: datetime, limit: int) -> list[AllocationRow]: ...

    async def set_rated(self, allocation_id: str, rated_until: datetime) -> None: ...

    async def close(
        self, allocation: Allocation, *, rated_until: datetime, ended_event_id: str | None = None
    ) -> None: ...

    async def record_fact(
        self,
        *,
        event_id: str,
        kind: str,
        placement_id: str,
        at: datetime,
        end_reason: EndReason | None = None,
    ) -> None: ...

    async def first_end(self, placement_id: str) -> tuple[datetime, EndReason] | None: ...

    async def first_end_event(self, placement_id: str) -> str | None: ...

    async def first_running(self, placement_id: str) -> datetime | None: ...

    async def record_host_fact(
        self, *, event_id: str, fact: HostFact, event_type: str | None = None
    ) -> None: ...

    async def open_workload(self, workload_id: str) -> tuple[str, str] | None: ...

    async def idle_state(self, workload_id: str) -> IdleState: ...

    async def save_idle(self, *, workload_id: str, tenant_id: str, state: IdleState) -> None: ...

    async def record_idle_action(
        self, *, workload_id: str, tenant_id: str, stage: str, idle_hours: float, at: datetime
    ) -> None: ...


class LedgerWrites(Protocol):
    """The append-only journal (LedgerStore; FakeLedgerStore)."""

    async def post(self, records: Sequence[EntryRecord]) -> list[EntryRecord]: ...

    async def live_charges_after(self, allocation_id: str, at: datetime) -> list[EntryRecord]: ...


class PriceWrites(Protocol):
    """The versioned price list (PriceStore; FakePriceStore)."""

    async def price_list(self) -> PriceList: ...

    async def add(self, entry: PriceEntry) -> bool: ...


class BudgetWrites(Protocol):
    """Budgets and their per-month state (BudgetStore; FakeBudgetStore)."""

    async def budget(self, tenant_id: str, project: str) -> Budget | None: ...

    async def state(self, tenant_id: str, project: str, month: str) -> BudgetState: ...

    async def save_state(self, tenant_id: str, project: str, state: BudgetState) -> None: ...

    async def put(
        self, tenant_id: str, project: str, *, limit_micro: int, thresholds: list[int], hard_stop: bool
    ) -> None: ...

    async def delete(self, tenant_id: str, project: str) -> bool: ...


class PolicyWrites(Protocol):
    """Tenant default tags, required-tag policies and flagged workloads (PolicyStore; FakePolicyStore)."""

    async def tenant_tags(self, tenant_id: str) -> dict[str, str]: ...

    async def set_tenant_tags(self, tenant_id: str, tags: Mapping[str, str]) -> None: ...

    async def required(self, tenant_id: str) -> frozenset[str]: ...

    async def set_required(self, tenant_id: str, keys: Sequence[str]) -> None: ...

    async def flag(
        self, *, workload_id: str, placement_id: str, tenant_id: str, missing: Sequence[str], at: datetime
    ) -> None: ...


class SlaWrites(Protocol):
    """SLA policies, incidents, moves and credit decisions (SlaStore; FakeSlaStore)."""

    async def policy(self, tenant_id: str) -> SlaPolicy | None: ...

    async def put_policy(self, tenant_id: str, policy: SlaPolicy) -> None: ...

    async def record_incident(self, incident: Incident) -> None: ...

    async def close_incident(
        self, incident_id: str, *, outcome: str, at: datetime, event_id: str
    ) -> None: ...

    async def incident(self, incident_id: str) -> Incident | None: ...

    async def record_move(self, move: WorkloadMove) -> None: ...

    async def moves_for_incident(self, incident_id: str) -> list[WorkloadMove]: ...

    async def moves_into(self, placement_id: str) -> list[WorkloadMove]: ...

    async def decision(self, incident_id: str, workload_id: str) -> CreditDecision | None: ...

    async def credited_between(self, tenant_id: str, *, start: datetime, end: datetime) -> int: ...

    async def record_decision(self, decision: CreditDecision) -> bool: ...


class BillingUnitOfWork(UnitOfWork, Protocol):
    """A transaction of billing's schema, with its stores on the same connection."""

    @property
    def allocations(self) -> AllocationWrites:
        """Allocations, lifecycle facts and idle state."""
        ...

    @property
    def ledger(self) -> LedgerWrites:
        """The journal and its postings."""
        ...

    @property
    def prices(self) -> PriceWrites:
        """The versioned price list."""
        ...

    @property
    def budgets(self) -> BudgetWrites:
        """Budgets and their monthly state."""
        ...

    @property
    def policies(self) -> PolicyWrites:
        """Tag policies, tenant default tags and flagged workloads."""
        ...

    @property
    def sla(self) -> SlaWrites:
        """SLA policies, incidents, moves and credit decisions."""
        ...


def billing_uow(runtime: ServiceRuntime) -> PostgresBillingUnitOfWork:
    """A new unit of work on the runtime's pool, with billing's stores."""
    return PostgresBillingUnitOfWork(pool=runtime.pool, source=runtime.settings.service_name)
