"""Ledger rules the database enforces, and accrual overrun corrected by reversing entries."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from libs.common.db import migrate, service_migrations
from libs.common.events import envelop, topics
from libs.common.events.billing import BudgetThresholdCrossedV1, IdleReclaimV1
from libs.common.events.telemetry import GpuRollup, NodeRollupV1
from services.billing.app import create_app
from services.billing.domain.rating import floor_to_grid
from services.billing.settings import BillingSettings
from tests.integration.billing.helpers import (
    ended,
    expected_micro,
    fetchval,
    host_started,
    ledger_total,
    placed,
    started,
)
from tests.integration.bus_fixtures import publish
from tests.integration.support import ADMIN_HEADERS, Isolation, TopicReader, eventually, running


async def test_postings_and_entries_refuse_update_delete_and_unbalanced_inserts(isolation: Isolation) -> None:
    schema = isolation.schema("billing")
    await migrate(dsn=isolation.infra.database_url, schema=schema, migrations=service_migrations("billing"))
    conn = await asyncpg.connect(isolation.infra.database_url, server_settings={"search_path": schema})
    try:
        await conn.execute(
            "INSERT INTO journal_entries VALUES ('e1', 's1', now(), 'acme', 'p', 'd', NULL, 'a', 'w', 'r', "
            "'on_demand', now(), now(), 'gpu_hour', 1, 1, 'x', 1, 5, now())"
        )
        await conn.execute(
            "INSERT INTO postings (entry_id, account, debit_micro, credit_micro, tenant_id, project, at) "
            "VALUES ('e1', 'tenant:acme:project:p', 5, 0, 'acme', 'p', now()), "
            "('e1', 'revenue:on_demand', 0, 5, 'acme', 'p', now())"
        )
        with pytest.raises(asyncpg.PostgresError, match="append-only"):
            await conn.execute("UPDATE postings SET debit_micro = 0")
        with pytest.raises(asyncpg.PostgresError, match="append-only"):
            await conn.execute("DELETE FROM postings")
        with pytest.raises(asyncpg.PostgresError, match="append-only"):
            await conn.execute("UPDATE journal_entries SET amount_micro = 0")
        with pytest.raises(asyncpg.PostgresError, match="not balanced"):
            await conn.execute(
                "INSERT INTO postings (entry_id, account, debit_micro, credit_micro, tenant_id, project, at) "
                "VALUES ('e1', 'tenant:acme:project:p', 7, 0, 'acme', 'p', now())"
            )
        assert await conn.fetchval("SELECT sum(debit_micro) - sum(credit_micro) FROM postings") == 0
    finally:
        await conn.close()


async def test_end_after_accrual_reverses_the_overrun_crosses_budgets_and_idle_instances_are_reclaimed(
    isolation: Isolation,
) -> None:
    settings = isolation.settings(
        BillingSettings, "billing", accrual_interval_s=3600, idle_after_s=180, idle_grace_s=120
    )
    t0 = floor_to_grid(datetime.now(UTC)) - timedelta(minutes=10)
    full = expected_micro(units=8, seconds=[60] * 5 + [30], micro_per_unit_hour=500_000)
    async with running(create_app(settings)) as client:
        budget = await client.put(
            "/v1/budgets/vision", json={"tenant_id": "acme", "limit_micro": full}, headers=ADMIN_HEADERS
        )
        assert budget.status_code == 200
        await publish(
            isolation, [placed("p1", at=t0, kind="instance"), started("p1", at=t0)], topic=topics.SCHEDULER
        )
        await publish(isolation, [host_started("p1", at=t0)], topic=topics.NODE_AGENT)
        await eventually(
            lambda: fetchval(isolation, "SELECT count(*) FROM allocations WHERE running"), what="running"
        )
        await eventually(lambda: fetchval(isolation, "SELECT count(*) FROM host_facts"), what="host's report")
        rated = await client.post("/v1/admin/accrual", headers=ADMIN_HEADERS)
        assert rated.json() == {"rated": 1}
        assert await ledger_total(isolation, "acme", "vision") > full  # ten minutes, more than it will owe
        # Accrual rates up to the last minute before now: ten minutes, or eleven if a minute turned meanwhile.
        accrued = await fetchval(isolation, "SELECT count(*) FROM journal_entries WHERE amount_micro > 0")
        assert accrued in (10, 11)

        rollups = [
            NodeRollupV1(
                node="node-1",
                minute=t0 + timedelta(minutes=m),
                gpus=[
                    GpuRollup(
                        gpu="GPU-p1-0", sm_util_max=1.0, samples=60, workload_id="wl-p1", tenant_id="acme"
                    )
                ],
            )
            for m in range(6)
        ]
        await publish(isolation, [envelop(r, source="test") for r in rollups], topic=topics.TELEMETRY_ROLLUPS)
        async with TopicReader(
            bootstrap=isolation.infra.kafka, topic=isolation.topic_prefix + topics.BILLING
        ) as r:
            await r.wait_for(
                lambda evs: (
                    {p.stage for _, p in evs if isinstance(p, IdleReclaimV1)}
                    == {"warning", "release_requested"}
                ),
                timeout=30,
                what="idle warning then release request",
            )
            await publish(
                isolation, [ended("p1", at=t0 + timedelta(minutes=5, seconds=30))], topic=topics.SCHEDULER
            )
            await eventually(lambda: _closed(isolation), timeout=30, what="end processed")
            assert await ledger_total(isolation, "acme", "vision") == full
            reversals = await fetchval(
                isolation, "SELECT count(*) FROM journal_entries WHERE amount_micro < 0"
            )
            assert (
                reversals == accrued - 5
            )  # minutes 5.. charged by accrual, undone; minute 5 re-rated to its half
            events = await r.wait_for(
                lambda evs: sum(isinstance(p, BudgetThresholdCrossedV1) for _, p in evs) >= 3,
                timeout=30,
                what="budget thresholds",
            )
        crossed = sorted(p.threshold_pct for _, p in events if isinstance(p, BudgetThresholdCrossedV1))
        assert crossed == [50, 80, 100]  # each once, although spend went above 100% and back
        recon = await client.get("/v1/admin/reconciliation", headers=ADMIN_HEADERS)
        assert recon.json()["equal"] is True


async def _closed(iso: Isolation) -> bool:
    return await fetchval(iso, "SELECT count(*) FROM allocations WHERE status = 'closed'") == 1
