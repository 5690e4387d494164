"""A workload lifecycle through the real broker and Postgres: exact charges, no double charge, exports."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

import asyncpg
import pyarrow.parquet as pq

from libs.common.events import envelop, topics
from libs.common.events.scheduler import WorkloadMigratingV1
from services.billing.app import create_app
from services.billing.settings import BillingSettings
from tests.integration.billing.helpers import (
    ended,
    expected_micro,
    fetchval,
    host_exited,
    host_started,
    ledger_total,
    placed,
    started,
)
from tests.integration.bus_fixtures import publish
from tests.integration.support import (
    ADMIN_HEADERS,
    Isolation,
    eventually,
    key_works,
    provision_tenant,
    running,
)

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
A100_OD, MIG_SPOT, L4_SPOT, DEFAULT_OD = 500_000, 300_000, 240_000, 650_000  # seeded micro per unit-hour


def _lifecycle() -> list:  # type: ignore[type-arg]
    migrate = WorkloadMigratingV1(
        workload_id="wl-p2a", tenant_id="acme", from_placement_id="p2a", to_placement_id="p2b"
    )
    moved = T0 + timedelta(minutes=10)
    return [
        placed("p1", at=T0 - timedelta(seconds=20), gpus=2, tags={"team": "cv"}),  # runs 20 s later
        placed("p2a", at=T0, project="nlp", profile="1g.10gb", units="1", pricing_class="spot"),
        placed("p3", at=T0, project="nlp", model="Z9000", units="2"),
        started("p1", at=T0, sent=T0 + timedelta(seconds=1)),
        started("p2a", at=T0),
        started("p3", at=T0),
        envelop(migrate, source="test", tenant="acme", time=moved - timedelta(seconds=30)),
        placed(  # placed 30 s before the host runs it there: charged from the run, on p2a until then
            "p2b",
            workload="wl-p2a",
            at=moved - timedelta(seconds=30),
            project="nlp",
            model="L4",
            units="4",
            pricing_class="spot",
        ),
        ended("p2a", at=moved - timedelta(seconds=30), outcome="migrated"),
        started("p2b", at=moved, workload="wl-p2a"),
        ended("p3", at=T0 + timedelta(minutes=5, seconds=2), ended_at=T0 + timedelta(minutes=5)),
        ended("p2b", at=T0 + timedelta(minutes=20), outcome="preempted", workload="wl-p2a"),
        ended("p1", at=T0 + timedelta(minutes=91), ended_at=T0 + timedelta(minutes=90, seconds=30)),
        ended("", at=T0 + timedelta(minutes=3), outcome="cancelled"),  # cancelled while still queued
    ]


def _host_reports() -> list:  # type: ignore[type-arg]
    """What the node agents said, on their own topic: independent of the scheduler's events."""
    return [
        host_started("p1", at=T0),
        host_started("p2a", at=T0),
        host_started("p3", at=T0),
        host_started("p2b", at=T0 + timedelta(minutes=10), workload="wl-p2a"),
        host_exited("p3", at=T0 + timedelta(minutes=5)),
        host_exited("p1", at=T0 + timedelta(minutes=90, seconds=30)),
    ]


EXPECTED_VISION = expected_micro(units=16, seconds=[60] * 90 + [30], micro_per_unit_hour=A100_OD)
EXPECTED_NLP = (
    expected_micro(units=1, seconds=[60] * 10, micro_per_unit_hour=MIG_SPOT)
    + expected_micro(units=4, seconds=[60] * 10, micro_per_unit_hour=L4_SPOT)
    + expected_micro(units=2, seconds=[60] * 5, micro_per_unit_hour=DEFAULT_OD)
)
ENTRIES = 91 + 10 + 10 + 5


async def _settled(iso: Isolation) -> bool:
    closed = await fetchval(iso, "SELECT count(*) FROM allocations WHERE status = 'closed'")
    entries = await fetchval(iso, "SELECT count(*) FROM journal_entries")
    reports = await fetchval(iso, "SELECT count(*) FROM host_facts")
    return closed == 4 and entries == ENTRIES and reports == len(_host_reports())


async def test_lifecycle_is_charged_exactly_once_however_often_its_events_arrive(
    isolation: Isolation,
) -> None:
    settings = isolation.settings(BillingSettings, "billing", accrual_interval_s=3600)
    async with running(create_app(settings)) as client:
        acme = await provision_tenant(isolation, "acme")
        globex = await provision_tenant(isolation, "globex")
        events = _lifecycle()
        await publish(
            isolation, [e for e in events for _ in range(2)], topic=topics.SCHEDULER
        )  # same ids twice
        await publish(isolation, _host_reports(), topic=topics.NODE_AGENT)
        await eventually(lambda: _settled(isolation), timeout=45, what="lifecycle charged")
        republished = [e.model_copy(update={"id": f"{e.id[:-4]}ffff"}) for e in events]  # new ids, same facts
        await publish(isolation, republished, topic=topics.SCHEDULER)
        handled = len(events)  # the migrating event too: billing keeps incident moves (SLA credits)
        await eventually(
            lambda: _inbox_has(isolation, 2 * handled), timeout=30, what="republished events consumed"
        )
        assert await _settled(isolation)
        assert await fetchval(isolation, "SELECT count(*) FROM lifecycle_facts WHERE placement_id = ''") == 0
        # Kept: 4 placed, 4 running and 3 ended facts per delivery (a migrated end is no end of its own),
        # and once the end of p2a where p2b started (a republished start starts nothing again).
        assert await fetchval(isolation, "SELECT count(*) FROM lifecycle_facts") == 2 * 11 + 1
        assert await ledger_total(isolation, "acme", "vision") == EXPECTED_VISION
        assert await ledger_total(isolation, "acme", "nlp") == EXPECTED_NLP
        spans = await _spans(isolation)
        assert spans["p1"] == (T0, T0 + timedelta(minutes=90, seconds=30))  # the host's run, not placed
        assert spans["p2a"][1] == spans["p2b"][0] == T0 + timedelta(minutes=10)  # one instant for both

        recon = (await client.get("/v1/admin/reconciliation", headers=ADMIN_HEADERS)).json()
        assert recon.pop("credits") == {"equal": True, "decisions": 0, "credited_micro": 0, "problems": []}
        assert recon.pop("debit_micro") == recon.pop("credit_micro")  # the ledger balances
        assert recon == {
            "equal": True,
            "balanced": True,
            "differences": [],
            "missing_keys": [],
            "unexpected_keys": [],
            "hosts": {"equal": True, "placements_checked": 4, "difference_micro": 0, "placements": []},
        }

        await eventually(lambda: key_works(client, acme, "/v1/balances"), what="tenant key replicated")
        await eventually(lambda: key_works(client, globex, "/v1/balances"), what="second key replicated")
        own = (await client.get("/v1/balances", headers={"X-API-Key": acme})).json()
        assert {(b["project"], b["balance_micro"]) for b in own} == {
            ("vision", EXPECTED_VISION),
            ("nlp", EXPECTED_NLP),
        }
        assert (await client.get("/v1/balances", headers={"X-API-Key": globex})).json() == []
        spying = await client.get("/v1/charges?tenant_id=acme", headers={"X-API-Key": globex})
        assert spying.status_code == 403

        parquet = await client.get(
            "/v1/exports/vision?format=parquet&start=2025-03-01T00:00:00Z&end=2025-03-02T00:00:00Z",
            headers={"X-API-Key": acme},
        )
        table = pq.read_table(io.BytesIO(parquet.content))
        debit = sum(table.column("debit_micro").to_pylist())
        assert debit == sum(table.column("credit_micro").to_pylist()) == EXPECTED_VISION
        assert table.num_rows == 2 * 91 == int(parquet.headers["x-export-rows"])
        assert int(parquet.headers["x-export-debit-micro"]) == debit

        by_team = (await client.get("/v1/costs?group_by=team", headers={"X-API-Key": acme})).json()
        assert {g["key"]: g["amount_micro"] for g in by_team["groups"]} == {
            "cv": EXPECTED_VISION,
            "(untagged)": EXPECTED_NLP,
        }
        bad = await client.get("/v1/costs?group_by=colour", headers={"X-API-Key": acme})
        assert bad.status_code == 422
        assert bad.json()["error"]["field"] == "group_by"
        backwards = await client.get(
            "/v1/exports/vision?start=2025-03-02T00:00:00Z&end=2025-03-01T00:00:00Z",
            headers={"X-API-Key": acme},
        )
        assert backwards.status_code == 422
        assert backwards.json()["error"]["field"] == "end"


async def _spans(iso: Isolation) -> dict[str, tuple[datetime, datetime]]:
    conn = await asyncpg.connect(
        iso.infra.database_url, server_settings={"search_path": iso.schema("billing")}
    )
    try:
        rows = await conn.fetch("SELECT DISTINCT placement_id, started_at, ended_at FROM allocations")
    finally:
        await conn.close()
    return {r["placement_id"]: (r["started_at"], r["ended_at"]) for r in rows}


async def _inbox_has(iso: Isolation, n: int) -> bool:
    count = await fetchval(iso, "SELECT count(*) FROM inbox WHERE topic = $1", topics.SCHEDULER)
    return count == n
