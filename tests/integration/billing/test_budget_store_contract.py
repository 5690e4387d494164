"""One contract for billing's budgets and their monthly state: FakeBudgetStore and BudgetStore."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from services.billing.adapters.unit_of_work import PostgresBillingUnitOfWork
from services.billing.adapters.unit_of_work_fake import FakeBillingUnitOfWork
from services.billing.domain.budgets import Budget, BudgetState
from services.billing.service.unit_of_work import BudgetWrites
from tests.integration.store_contract import Units, fake_units, service_pool, sql_units
from tests.integration.support import Isolation

pytestmark = pytest.mark.integration


@pytest.fixture(params=["fake", "postgres"])
async def units(request: pytest.FixtureRequest, isolation: Isolation) -> AsyncIterator[Units[BudgetWrites]]:
    if request.param == "fake":
        yield fake_units(FakeBillingUnitOfWork(), lambda uow: uow.budgets)
        return
    pool: asyncpg.Pool[Any]
    async with service_pool(isolation, "billing") as pool:
        yield sql_units(pool, PostgresBillingUnitOfWork, lambda uow: uow.budgets)


async def test_a_budget_is_put_replaced_and_deleted_per_project(units: Units[BudgetWrites]) -> None:
    async with units() as store:
        assert await store.budget("acme", "vision") is None
        await store.put("acme", "vision", limit_micro=100, thresholds=[80, 50], hard_stop=False)
        await store.put("acme", "nlp", limit_micro=7, thresholds=[100], hard_stop=True)
    async with units() as store:
        await store.put("acme", "vision", limit_micro=300, thresholds=[90], hard_stop=True)

    async with units() as store:
        assert await store.budget("acme", "vision") == Budget(
            tenant_id="acme", project="vision", limit_micro=300, thresholds=(90,), hard_stop=True
        )
        assert await store.budget("acme", "nlp") == Budget(
            tenant_id="acme", project="nlp", limit_micro=7, thresholds=(100,), hard_stop=True
        )
        assert await store.budget("globex", "vision") is None
        assert await store.delete("acme", "vision")
        assert not await store.delete("acme", "vision")
        assert await store.budget("acme", "vision") is None


async def test_a_months_state_starts_empty_and_saving_it_replaces_only_that_month(
    units: Units[BudgetWrites],
) -> None:
    march = BudgetState(month="2025-03", spent_micro=120, crossed=frozenset({50, 100}))
    async with units() as store:
        assert await store.state("acme", "vision", "2025-03") == BudgetState(month="2025-03")
        await store.save_state("acme", "vision", BudgetState(month="2025-03", spent_micro=1))
        await store.save_state("acme", "vision", BudgetState(month="2025-04", spent_micro=2))
    async with units() as store:
        await store.save_state("acme", "vision", march)

    async with units() as store:
        assert await store.state("acme", "vision", "2025-03") == march
        assert await store.state("acme", "vision", "2025-04") == BudgetState(month="2025-04", spent_micro=2)
        assert await store.state("acme", "nlp", "2025-03") == BudgetState(month="2025-03")


async def test_budget_writes_of_a_unit_of_work_that_does_not_commit_are_not_kept(
    units: Units[BudgetWrites],
) -> None:
    async with units() as store:
        await store.put("acme", "vision", limit_micro=100, thresholds=[50], hard_stop=False)
    async with units.rolled_back() as store:
        await store.put("acme", "vision", limit_micro=999, thresholds=[10], hard_stop=True)
        await store.save_state("acme", "vision", BudgetState(month="2025-03", spent_micro=5))
        assert await store.delete("acme", "vision")

    async with units() as store:
        assert await store.budget("acme", "vision") == Budget(
            tenant_id="acme", project="vision", limit_micro=100, thresholds=(50,), hard_stop=False
        )
        assert await store.state("acme", "vision", "2025-03") == BudgetState(month="2025-03")
