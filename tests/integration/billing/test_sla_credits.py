"""A fault on a billed, running workload, its migration, and what the tenant's bill says about it.

Two jobs of one tenant run from t0. At t0+10m recovery opens an incident on each: a GPU fallen off the
bus (xid_79, the platform's) and an application channel error (xid_43, the job's own). Each is moved and
runs again 31 s later on a new placement, then completes at t0+20m. Billing charges where each job was
until it ran again (a move is one instant), so the 31 s are charged; the platform fault's 31 s are
credited back at the default policy's rate 1, the application fault's are not, and the bill says why.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from urllib.parse import quote

from libs.common.events import Envelope, envelop, topics
from libs.common.events.recovery import IncidentClosedV1, IncidentOpenedV1
from libs.common.events.scheduler import WorkloadMigratingV1
from services.billing.app import create_app
from services.billing.domain.rating import floor_to_grid
from services.billing.settings import BillingSettings
from tests.integration.billing.helpers import ended, expected_micro, fetchval, host_started, placed, started
from tests.integration.bus_fixtures import publish
from tests.integration.support import (
    ADMIN_HEADERS,
    Isolation,
    eventually,
    key_works,
    provision_tenant,
    running,
)

A100_OD = 500_000  # seeded micro per unit-hour
LOST_S = 31


async def test_a_platform_fault_is_credited_for_the_time_lost_and_an_application_fault_is_not(
    isolation: Isolation,
) -> None:
    settings = isolation.settings(BillingSettings, "billing", accrual_interval_s=3600)
    t0 = floor_to_grid(datetime.now(UTC)) - timedelta(minutes=30)
    detect, back, done = (
        t0 + timedelta(minutes=10),
        t0 + timedelta(minutes=10, seconds=LOST_S),
        t0 + timedelta(minutes=20),
    )
    async with running(create_app(settings)) as client:
        acme = await provision_tenant(isolation, "acme")
        globex = await provision_tenant(isolation, "globex")
        await publish(isolation, _jobs(t0, detect, back, done), topic=topics.SCHEDULER)
        await publish(isolation, _incidents(detect, back), topic=topics.RECOVERY)
        reports = [host_started(p, at=t0, workload=w) for p, w in (("hw1", "wl-hw"), ("app1", "wl-app"))]
        reports += [host_started(p, at=back, workload=w) for p, w in (("hw2", "wl-hw"), ("app2", "wl-app"))]
        await publish(isolation, reports, topic=topics.NODE_AGENT)
        await eventually(lambda: _count(isolation, "sla_credits", 2), timeout=45, what="both decided")
        await eventually(lambda: _count(isolation, "allocations WHERE status = 'closed'", 4), what="ends")
        await eventually(lambda: _count(isolation, "host_facts", 4), what="the hosts' reports")
        await eventually(lambda: _count(isolation, "incidents WHERE closed_at IS NOT NULL", 2), what="closed")
        await eventually(lambda: key_works(client, acme, "/v1/balances"), what="tenant key replicated")
        await eventually(lambda: key_works(client, globex, "/v1/balances"), what="second key replicated")
        tenant = {"X-API-Key": acme}

        # The bill: charged for the lost 31 s on the old placement, the platform fault's credited back.
        lost = expected_micro(units=8, seconds=[LOST_S], micro_per_unit_hour=A100_OD)
        per_job = expected_micro(
            units=8, seconds=[60] * 10 + [LOST_S, 60 - LOST_S] + [60] * 9, micro_per_unit_hour=A100_OD
        )
        ran = expected_micro(
            units=8, seconds=[60] * 10 + [60 - LOST_S] + [60] * 9, micro_per_unit_hour=A100_OD
        )
        balances = {b["project"]: b for b in (await client.get("/v1/balances", headers=tenant)).json()}
        assert balances["infra"]["charged_micro"] == per_job
        assert balances["infra"]["credited_micro"] == lost
        assert balances["infra"]["balance_micro"] == ran == per_job - lost  # only the time it ran
        assert (balances["app"]["charged_micro"], balances["app"]["credited_micro"]) == (per_job, 0)
        costs = (await client.get("/v1/costs", headers=tenant)).json()
        assert {g["key"]: g["amount_micro"] for g in costs["groups"]} == {"infra": ran, "app": per_job}

        credits = {c["incident_id"]: c for c in (await client.get("/v1/credits", headers=tenant)).json()}
        hw, app = credits["inc-hw"], credits["inc-app"]
        assert (hw["eligible"], hw["fault_class"], hw["lost_seconds"], hw["amount_micro"]) == (
            True,
            "hardware",
            LOST_S,
            lost,
        )
        assert hw["entry_id"] == "credit:inc-hw:wl-hw"
        assert (app["eligible"], app["amount_micro"], app["entry_id"]) == (False, 0, None)
        assert app["reason"] == "application fault (xid_43): not the platform's"
        assert app["lost_micro"] == lost  # the time was lost all the same, and charged

        # One charge line explained: the cell the fault struck, on the placement the job left.
        [line] = [
            c
            for c in (await client.get("/v1/charges?workload_id=wl-hw", headers=tenant)).json()
            if c["kind"] == "charge" and datetime.fromisoformat(c["period_start"]) == detect
        ]
        assert line["opened_by_event_id"] is not None
        assert line["closed_by_event_id"] is not None
        path = f"/v1/charges/{quote(line['entry_id'], safe='')}/explain"
        explained = (await client.get(path, headers=tenant)).json()
        assert explained["opened_by"]["type"] == "scheduler.workload.running.v1"
        assert datetime.fromisoformat(explained["opened_by"]["at"]) == t0
        assert explained["closed_by"]["placement_id"] == "hw1"
        assert line["source_event_id"].startswith(explained["opened_by"]["event_id"])
        kinds = {(e["type"], e["placement_id"]) for e in explained["events"]}
        assert {
            ("scheduler.workload.placed.v1", "hw1"),
            ("scheduler.workload.running.v1", "hw1"),
            ("scheduler.workload.migrating.v1", "hw1"),
            ("scheduler.workload.running.v1", "hw2"),
            ("agent.workload.started.v1", "hw2"),
            ("recovery.incident.opened.v1", None),
            ("recovery.incident.closed.v1", None),
        } <= kinds
        assert [i["incident_id"] for i in explained["incidents"]] == ["inc-hw"]
        assert [(c["incident_id"], c["amount_micro"]) for c in explained["credits"]] == [("inc-hw", lost)]
        assert explained["price"]["price_id"] == line["price_id"] == "seed:A100-80GB:on_demand"
        assert explained["routing"]["project"] == "infra"
        assert (await client.get(path, headers={"X-API-Key": globex})).status_code == 404

        # The ledger balances with the credit in it, and reconciles: charges, hosts and credits.
        report = (await client.get("/v1/admin/reconciliation", headers=ADMIN_HEADERS)).json()
        assert report["balanced"] is True
        assert report["debit_micro"] == report["credit_micro"]
        assert report["credits"] == {"equal": True, "decisions": 2, "credited_micro": lost, "problems": []}
        assert report["hosts"]["equal"] is True
        assert report["equal"] is True, report


async def test_an_sla_policy_is_admin_managed_and_validated(isolation: Isolation) -> None:
    settings = isolation.settings(BillingSettings, "billing")
    async with running(create_app(settings)) as client:
        url = "/v1/admin/tenants/acme/sla"
        default = (await client.get(url, headers=ADMIN_HEADERS)).json()
        assert (default["source"], default["credit_rate"]) == ("default", "1")
        assert "application" not in default["fault_classes"]
        bad = await client.put(
            url,
            json={"fault_classes": ["hardware"], "credit_rate": "11", "monthly_cap_micro": 5},
            headers=ADMIN_HEADERS,
        )
        assert bad.status_code == 422
        assert "credit_rate" in bad.text
        unknown = await client.put(
            url,
            json={"fault_classes": ["cosmic-rays"], "credit_rate": "1", "monthly_cap_micro": 5},
            headers=ADMIN_HEADERS,
        )
        assert unknown.status_code == 422
        assert "fault_classes" in unknown.text
        body = {"fault_classes": ["memory", "hardware"], "credit_rate": "0.5", "monthly_cap_micro": 5}
        assert (await client.put(url, json=body, headers=ADMIN_HEADERS)).status_code == 200
        own = (await client.get(url, headers=ADMIN_HEADERS)).json()
        assert own == {
            "tenant_id": "acme",
            "source": "tenant",
            "fault_classes": ["hardware", "memory"],
            "credit_rate": "0.5",
            "monthly_cap_micro": 5,
        }


def _jobs(t0: datetime, detect: datetime, back: datetime, done: datetime) -> list[Envelope]:
    out: list[Envelope] = []
    for old, new, workload, project, incident in (
        ("hw1", "hw2", "wl-hw", "infra", "inc-hw"),
        ("app1", "app2", "wl-app", "app", "inc-app"),
    ):
        moved = detect + timedelta(seconds=5)
        migrating = WorkloadMigratingV1(
            workload_id=workload,
            tenant_id="acme",
            from_placement_id=old,
            to_placement_id=new,
            reason="gpu failed",
            incident_id=incident,
        )
        out += [
            placed(old, at=t0, project=project, workload=workload),
            started(old, at=t0, workload=workload),
            ended(old, at=moved, outcome="migrated", workload=workload),
            placed(new, at=moved, project=project, workload=workload),
            envelop(migrating, source="test", tenant="acme", time=moved),
            started(new, at=back, workload=workload),
            ended(new, at=done, ended_at=done, workload=workload),
        ]
    return out


def _incidents(detect: datetime, back: datetime) -> list[Envelope]:
    out: list[Envelope] = []
    for incident, fault in (("inc-hw", "xid_79"), ("inc-app", "xid_43")):
        opened = IncidentOpenedV1(incident_id=incident, fault_type=fault, node="node-1", severity="critical")
        closed = IncidentClosedV1(incident_id=incident, outcome="recovered", seconds_to_recover=LOST_S)
        out += [
            envelop(opened, source="/gpucloud/recovery", time=detect),
            envelop(closed, source="/gpucloud/recovery", time=back),
        ]
    return out


async def _count(iso: Isolation, where: str, n: int) -> bool:
    return await fetchval(iso, f"SELECT count(*) FROM {where}") == n
