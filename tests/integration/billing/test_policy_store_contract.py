"""One contract for tenant default tags, tag policies and flagged workloads: FakePolicyStore, PolicyStore."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from services.billing.adapters import config_queries
from services.billing.adapters.policy_store_fake import FakePolicyStore
from services.billing.adapters.unit_of_work import PostgresBillingUnitOfWork
from services.billing.adapters.unit_of_work_fake import FakeBillingUnitOfWork
from services.billing.domain.tags import FlaggedWorkload
from services.billing.service.unit_of_work import PolicyWrites
from tests.integration.store_contract import Units, fake_units, service_pool, sql_units
from tests.integration.support import Isolation

pytestmark = pytest.mark.integration

T0 = datetime(2025, 3, 14, 9, 30, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Subject:
    units: Units[PolicyWrites]
    flagged: Callable[[], Awaitable[list[FlaggedWorkload]]]  # by time, workload and placement


def _ordered(flagged: list[FlaggedWorkload]) -> list[FlaggedWorkload]:
    return sorted(flagged, key=lambda f: (f.flagged_at, f.workload_id, f.placement_id))


def fake_subject() -> Subject:
    fake = FakePolicyStore()

    async def flagged() -> list[FlaggedWorkload]:
        return _ordered(fake.flagged)

    return Subject(
        units=fake_units(FakeBillingUnitOfWork(policies=fake), lambda uow: uow.policies), flagged=flagged
    )


def sql_subject(pool: asyncpg.Pool[Any]) -> Subject:
    async def flagged() -> list[FlaggedWorkload]:
        return _ordered(await config_queries.tag_violations(pool, tenant_id=None))

    units = sql_units(pool, PostgresBillingUnitOfWork, lambda uow: uow.policies)
    return Subject(units=units, flagged=flagged)


@pytest.fixture(params=["fake", "postgres"])
async def subject(request: pytest.FixtureRequest, isolation: Isolation) -> AsyncIterator[Subject]:
    if request.param == "fake":
        yield fake_subject()
        return
    async with service_pool(isolation, "billing") as pool:
        yield sql_subject(pool)


async def test_a_tenants_default_tags_and_required_keys_are_replaced_whole(subject: Subject) -> None:
    async with subject.units() as store:
        assert await store.tenant_tags("acme") == {}
        assert await store.required("acme") == frozenset()
        await store.set_tenant_tags("acme", {"team": "cv", "cost-center": "cc-1"})
        await store.set_required("acme", ["team", "project", "team"])
        await store.set_required("globex", ["owner"])
    async with subject.units() as store:
        await store.set_tenant_tags("acme", {"team": "nlp"})
        await store.set_required("acme", ["cost-center"])

    async with subject.units() as store:
        assert await store.tenant_tags("acme") == {"team": "nlp"}
        assert await store.required("acme") == frozenset({"cost-center"})
        assert await store.required("globex") == frozenset({"owner"})
        assert await store.tenant_tags("globex") == {}


async def test_a_placement_is_flagged_once_with_its_first_missing_keys(subject: Subject) -> None:
    async with subject.units() as store:
        await store.flag(workload_id="w1", placement_id="p1", tenant_id="acme", missing=["team"], at=T0)
    later = T0 + timedelta(minutes=5)
    async with subject.units() as store:
        await store.flag(
            workload_id="w1", placement_id="p1", tenant_id="acme", missing=["team", "cc"], at=later
        )
        await store.flag(workload_id="w1", placement_id="p2", tenant_id="acme", missing=["cc"], at=later)

    assert await subject.flagged() == [
        FlaggedWorkload(
            workload_id="w1", placement_id="p1", tenant_id="acme", missing=("team",), flagged_at=T0
        ),
        FlaggedWorkload(
            workload_id="w1", placement_id="p2", tenant_id="acme", missing=("cc",), flagged_at=later
        ),
    ]


async def test_policy_writes_of_a_unit_of_work_that_does_not_commit_are_not_kept(subject: Subject) -> None:
    async with subject.units() as store:
        await store.set_required("acme", ["team"])
    async with subject.units.rolled_back() as store:
        await store.set_required("acme", ["owner"])
        await store.set_tenant_tags("acme", {"team": "cv"})
        await store.flag(workload_id="w1", placement_id="p1", tenant_id="acme", missing=["team"], at=T0)

    async with subject.units() as store:
        assert await store.required("acme") == frozenset({"team"})
        assert await store.tenant_tags("acme") == {}
    assert await subject.flagged() == []
