"""LedgerStore.post against the real database: one statement per batch, each entry and its postings once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import asyncpg
import pytest

from libs.common.db import migrate, service_migrations
from services.billing.adapters.ledger_store import LedgerStore
from services.billing.adapters.price_store import PriceStore
from services.billing.domain.entry_records import EntryRecord, record_for_charge, record_for_reversal
from services.billing.domain.prices import PricingClass, ResourceKey
from services.billing.domain.rating import Allocation, EndReason, close, rate
from tests.integration.support import Isolation

T0 = datetime(2025, 1, 1, tzinfo=UTC)


@asynccontextmanager
async def _ledger(isolation: Isolation) -> AsyncIterator[asyncpg.Connection[Any]]:
    schema = isolation.schema("billing")
    await migrate(dsn=isolation.infra.database_url, schema=schema, migrations=service_migrations("billing"))
    conn = await asyncpg.connect(isolation.infra.database_url, server_settings={"search_path": schema})
    try:
        yield conn
    finally:
        await conn.close()


async def _charges(conn: asyncpg.Connection[Any], *, minutes: float) -> list[EntryRecord]:
    allocation = Allocation(
        allocation_id="p-1/A100-80GB",
        workload_id="wl-1",
        tenant_id="acme",
        project="vision",
        resource=ResourceKey(gpu_model="A100-80GB"),
        pricing_class=PricingClass.ON_DEMAND,
        compute_units=Decimal(8),
        gpus=Decimal(1),
        started_at=T0,
    )
    end = T0 + timedelta(minutes=minutes)
    closed = close(allocation, at=end, reason=EndReason.COMPLETED)
    prices = await PriceStore(conn).price_list()
    return [
        record_for_charge(line)
        for line in rate(allocation=closed, rated_until=None, now=end, prices=prices).lines
    ]


async def test_a_batch_posted_twice_holds_each_entry_and_its_postings_once(isolation: Isolation) -> None:
    async with _ledger(isolation) as conn:
        records = await _charges(conn, minutes=90.5)
        async with conn.transaction():
            first = await LedgerStore(conn).post([*records, records[3]])  # one entry passed twice
        async with conn.transaction():
            again = await LedgerStore(conn).post(records)

        assert first == records
        assert again == []
        assert await conn.fetchval("SELECT count(*) FROM journal_entries") == 91
        assert await conn.fetchval("SELECT count(*) FROM postings") == 182
        assert await conn.fetchval("SELECT sum(debit_micro) FROM postings") == sum(
            r.amount_micro for r in records
        )
        assert await conn.fetchval("SELECT sum(debit_micro) - sum(credit_micro) FROM postings") == 0


async def test_postings_carry_their_entry_and_keep_the_entry_order(isolation: Isolation) -> None:
    async with _ledger(isolation) as conn:
        records = await _charges(conn, minutes=3)
        reversal = record_for_reversal(records[-1], reason="charged past the completed end", at=T0)
        async with conn.transaction():
            await LedgerStore(conn).post([*records, reversal])

        rows = await conn.fetch(
            "SELECT p.entry_id, p.account, p.debit_micro, p.credit_micro, p.tenant_id, p.project, p.at "
            "FROM postings p ORDER BY p.posting_id"
        )
        expected = [
            (r.entry.entry_id, p.account, p.debit_micro, p.credit_micro, "acme", "vision", r.entry.at)
            for r in (*records, reversal)
            for p in r.entry.postings
        ]
        assert [tuple(row) for row in rows] == expected


async def test_the_database_refuses_an_unbalanced_entry_that_slipped_past_python(
    isolation: Isolation,
) -> None:
    async with _ledger(isolation) as conn:
        good, bad = await _charges(conn, minutes=2)
        credit = bad.entry.postings[1]
        object.__setattr__(credit, "credit_micro", credit.credit_micro - 1)  # frozen: bypassed on purpose

        with pytest.raises(asyncpg.PostgresError, match="not balanced"):
            async with conn.transaction():
                await LedgerStore(conn).post([good, bad])
        assert await conn.fetchval("SELECT count(*) FROM journal_entries") == 0
