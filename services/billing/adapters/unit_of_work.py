"""Billing's Postgres unit of work: the platform's transaction with billing's stores on it."""

from __future__ import annotations

from libs.common.db.uow import PostgresUnitOfWork
from services.billing.adapters.allocation_store import AllocationStore
from services.billing.adapters.budget_store import BudgetStore
from services.billing.adapters.ledger_store import LedgerStore
from services.billing.adapters.policy_store import PolicyStore
from services.billing.adapters.price_store import PriceStore
from services.billing.adapters.sla_store import SlaStore

__all__ = ["PostgresBillingUnitOfWork"]


class PostgresBillingUnitOfWork(PostgresUnitOfWork):
    """Each store is built on the transaction's connection when asked for (so only inside the block)."""

    @property
    def allocations(self) -> AllocationStore:
        return AllocationStore(self.conn)

    @property
    def ledger(self) -> LedgerStore:
        return LedgerStore(self.conn)

    @property
    def prices(self) -> PriceStore:
        return PriceStore(self.conn)

    @property
    def budgets(self) -> BudgetStore:
        return BudgetStore(self.conn)

    @property
    def policies(self) -> PolicyStore:
        return PolicyStore(self.conn)

    @property
    def sla(self) -> SlaStore:
        return SlaStore(self.conn)
