"""One contract for billing's versioned price list: FakePriceStore and PriceStore (less the seeded prices)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from services.billing.adapters.unit_of_work import PostgresBillingUnitOfWork
from services.billing.adapters.unit_of_work_fake import FakeBillingUnitOfWork
from services.billing.domain.prices import PriceBasis, PriceEntry, PricingClass, ResourceKey
from services.billing.service.unit_of_work import PriceWrites
from tests.integration.store_contract import Units, fake_units, service_pool, sql_units
from tests.integration.support import Isolation

pytestmark = pytest.mark.integration

T0 = datetime(2025, 3, 14, 9, 30, tzinfo=UTC)
X9 = ResourceKey(gpu_model="X9-contract")  # no seeded price names it


@pytest.fixture(params=["fake", "postgres"])
async def units(request: pytest.FixtureRequest, isolation: Isolation) -> AsyncIterator[Units[PriceWrites]]:
    if request.param == "fake":
        yield fake_units(FakeBillingUnitOfWork(), lambda uow: uow.prices)
        return
    pool: asyncpg.Pool[Any]
    async with service_pool(isolation, "billing") as pool:
        yield sql_units(pool, PostgresBillingUnitOfWork, lambda uow: uow.prices)


def _price(price_id: str, *, at: datetime = T0, **changes: Any) -> PriceEntry:
    values: dict[str, Any] = {
        "price_id": price_id,
        "resource": X9,
        "pricing_class": PricingClass.ON_DEMAND,
        "basis": PriceBasis.GPU_HOUR,
        "micro_per_hour": 1_000_000,
        "effective_from": at,
    }
    return PriceEntry(**(values | changes))


async def _added(store: PriceWrites) -> list[PriceEntry]:
    return [e for e in (await store.price_list()).entries if not e.price_id.startswith("seed:")]


async def test_added_versions_are_listed_by_effective_time_then_id(units: Units[PriceWrites]) -> None:
    later = _price("a-later", at=T0 + timedelta(days=1), effective_to=T0 + timedelta(days=2))
    mig = _price("z-mig", resource=ResourceKey(gpu_model="X9-contract", mig_profile="1g"))
    share = _price("b-share", resource=ResourceKey(gpu_model="X9-contract", share_of=4))
    spot = _price("m-spot", pricing_class=PricingClass.SPOT, basis=PriceBasis.COMPUTE_UNIT_HOUR)
    async with units() as store:
        for entry in (later, mig, share, spot, _price("c-base")):
            assert await store.add(entry)

    async with units() as store:
        assert await _added(store) == [share, _price("c-base"), spot, mig, later]


async def test_a_version_with_a_known_id_or_for_a_taken_instant_is_refused(units: Units[PriceWrites]) -> None:
    async with units() as store:
        assert await store.add(_price("p1"))
    async with units() as store:
        assert not await store.add(_price("p1", at=T0 + timedelta(days=1)))
        assert not await store.add(_price("p2", micro_per_hour=5))  # same resource, class and instant
        assert await store.add(_price("p3", pricing_class=PricingClass.RESERVED))

    async with units() as store:
        assert await _added(store) == [_price("p1"), _price("p3", pricing_class=PricingClass.RESERVED)]


async def test_a_version_added_by_a_unit_of_work_that_does_not_commit_is_not_kept(
    units: Units[PriceWrites],
) -> None:
    async with units.rolled_back() as store:
        assert await store.add(_price("p1"))

    async with units() as store:
        assert await _added(store) == []
        assert await store.add(_price("p1"))
