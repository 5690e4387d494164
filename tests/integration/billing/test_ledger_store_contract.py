"""One contract for billing's append-only journal: FakeLedgerStore and LedgerStore."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import asyncpg
import pytest

from services.billing.adapters import ledger_queries
from services.billing.adapters.ledger_store_fake import FakeLedgerStore
from services.billing.adapters.unit_of_work import PostgresBillingUnitOfWork
from services.billing.adapters.unit_of_work_fake import FakeBillingUnitOfWork
from services.billing.domain.entry_records import EntryRecord, record_for_reversal, records_for_charges
from services.billing.domain.ledger import JournalEntry
from services.billing.domain.prices import PriceBasis, PriceEntry, PriceList, PricingClass, ResourceKey
from services.billing.domain.rating import Allocation, EndReason, close, rate
from services.billing.service.unit_of_work import LedgerWrites
from tests.integration.store_contract import Units, fake_units, service_pool, sql_units
from tests.integration.support import Isolation

pytestmark = pytest.mark.integration

T0 = datetime(2025, 3, 14, 9, 30, tzinfo=UTC)
A100 = ResourceKey(gpu_model="A100-80GB")
PRICES = PriceList.of(
    [
        PriceEntry(
            price_id="od-1",
            resource=A100,
            pricing_class=PricingClass.ON_DEMAND,
            basis=PriceBasis.COMPUTE_UNIT_HOUR,
            micro_per_hour=500_000,
            effective_from=T0 - timedelta(days=1),
        )
    ]
)


@dataclass(frozen=True, slots=True)
class Subject:
    units: Units[LedgerWrites]
    entries: Callable[[], Awaitable[list[JournalEntry]]]  # every entry, by time then id


def fake_subject() -> Subject:
    fake = FakeLedgerStore()

    async def entries() -> list[JournalEntry]:
        return sorted((r.entry for r in fake.records), key=lambda e: (e.at, e.entry_id))

    units = fake_units(FakeBillingUnitOfWork(ledger=fake), lambda uow: uow.ledger)
    return Subject(units=units, entries=entries)


def sql_subject(pool: asyncpg.Pool[Any]) -> Subject:
    async def entries() -> list[JournalEntry]:
        return await ledger_queries.entries_with_postings(
            pool, tenant_id=None, project=None, limit=10_000, offset=0
        )

    units = sql_units(pool, PostgresBillingUnitOfWork, lambda uow: uow.ledger)
    return Subject(units=units, entries=entries)


@pytest.fixture(params=["fake", "postgres"])
async def subject(request: pytest.FixtureRequest, isolation: Isolation) -> AsyncIterator[Subject]:
    if request.param == "fake":
        yield fake_subject()
        return
    async with service_pool(isolation, "billing") as pool:
        yield sql_subject(pool)


def _charges(allocation_id: str, *, minutes: float, project: str = "vision") -> list[EntryRecord]:
    """The charge records of an allocation held for `minutes` from T0, one per minute on the grid."""
    allocation = Allocation(
        allocation_id=allocation_id,
        workload_id=f"wl-{allocation_id}",
        tenant_id="acme",
        project=project,
        resource=A100,
        pricing_class=PricingClass.ON_DEMAND,
        compute_units=Decimal(8),
        gpus=Decimal(1),
        started_at=T0,
    )
    end = T0 + timedelta(minutes=minutes)
    closed = close(allocation, at=end, reason=EndReason.COMPLETED)
    return records_for_charges(rate(allocation=closed, rated_until=None, now=end, prices=PRICES).lines)


def _reversal(record: EntryRecord) -> EntryRecord:
    return record_for_reversal(record, reason="charged past the completed end", at=record.period_start)


async def test_a_batch_is_posted_once_and_posting_it_again_posts_nothing(subject: Subject) -> None:
    records = _charges("a1", minutes=3.5)
    async with subject.units() as store:
        assert await store.post([*records, records[1]]) == records  # one entry passed twice
    async with subject.units() as store:
        assert await store.post(records) == []
        assert await store.post([]) == []

    assert await subject.entries() == [r.entry for r in records]


async def test_an_entry_repeating_a_posted_source_event_or_reversal_is_not_posted(subject: Subject) -> None:
    first, second = _charges("a1", minutes=2)
    undo = _reversal(first)
    async with subject.units() as store:
        await store.post([first, undo])
    renamed = replace(second, entry=replace(second.entry, entry_id="charge:other"))
    same_source = replace(renamed, entry=replace(renamed.entry, source_event_id=first.entry.source_event_id))
    undo_again = replace(undo, entry=replace(undo.entry, entry_id="reversal:again", source_event_id="s-x"))

    async with subject.units() as store:
        assert await store.post([same_source, undo_again, second]) == [second]

    assert await subject.entries() == [undo.entry, first.entry, second.entry]  # by time: undo at T0


async def test_live_charges_are_an_allocations_unreversed_charges_ending_after_an_instant(
    subject: Subject,
) -> None:
    mine, other = _charges("a1", minutes=5), _charges("a2", minutes=5)
    async with subject.units() as store:
        await store.post([*reversed(mine), *other, _reversal(mine[3])])

    async with subject.units() as store:
        assert await store.live_charges_after("a1", T0 + timedelta(minutes=2)) == [mine[2], mine[4]]
        assert await store.live_charges_after("a1", T0 + timedelta(minutes=5)) == []
        assert await store.live_charges_after("a1", T0) == [mine[0], mine[1], mine[2], mine[4]]
        assert await store.live_charges_after("unknown", T0) == []


async def test_entries_of_a_unit_of_work_that_does_not_commit_are_not_kept(subject: Subject) -> None:
    kept, dropped = _charges("a1", minutes=1), _charges("a2", minutes=2)
    async with subject.units() as store:
        await store.post(kept)
    async with subject.units.rolled_back() as store:
        assert await store.post([*dropped, _reversal(kept[0])]) != []

    assert await subject.entries() == [kept[0].entry]
    async with subject.units() as store:
        assert await store.live_charges_after("a1", T0) == kept
        assert await store.post(dropped) == dropped, "what was rolled back may be posted again"
