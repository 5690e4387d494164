"""Billing's unit of work for unit tests: events and every store in memory, rolled back unless committed.

Each store is the fake beside its real twin, held to it by a contract test in tests/integration/billing/
(``test_<store>_store_contract.py``), so a handler runs here as it runs on Postgres.
"""

from __future__ import annotations

from typing import Any

from libs.common.testing import FakeUnitOfWork
from services.billing.adapters.allocation_store_fake import FakeAllocationStore
from services.billing.adapters.budget_store_fake import FakeBudgetStore
from services.billing.adapters.ledger_store_fake import FakeLedgerStore
from services.billing.adapters.policy_store_fake import FakePolicyStore
from services.billing.adapters.price_store_fake import FakePriceStore
from services.billing.adapters.sla_store_fake import FakeSlaStore

__all__ = ["FakeBillingUnitOfWork"]


class FakeBillingUnitOfWork(FakeUnitOfWork):
    """Events and billing's stores in memory; the stores keep what committed blocks wrote."""

    def __init__(
        self,
        *,
        allocations: FakeAllocationStore | None = None,
        ledger: FakeLedgerStore | None = None,
        prices: FakePriceStore | None = None,
        budgets: FakeBudgetStore | None = None,
        policies: FakePolicyStore | None = None,
        sla: FakeSlaStore | None = None,
        conn: Any = None,
    ) -> None:
        self.allocations = FakeAllocationStore() if allocations is None else allocations
        self.ledger = FakeLedgerStore() if ledger is None else ledger
        self.prices = FakePriceStore() if prices is None else prices
        self.budgets = FakeBudgetStore() if budgets is None else budgets
        self.policies = FakePolicyStore() if policies is None else policies
        self.sla = FakeSlaStore() if sla is None else sla
        tracked = [self.allocations, self.ledger, self.prices, self.budgets, self.policies, self.sla]
        super().__init__(conn, tracked=tracked)
