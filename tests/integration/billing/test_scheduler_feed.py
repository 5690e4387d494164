"""What billing feeds the scheduler, end to end through the real broker: a hard-stop budget crossed
refuses the project's new work at admission, and billing's decayed usage sets the tenant's fair share.

Both services run in this process on one test's slice; the lifecycle billing charges is published as
the scheduler and the node agent would, so the charges have known, past instants.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from libs.common.events import topics
from services.billing.app import create_app as billing_app
from services.billing.settings import BillingSettings
from services.scheduler.app import create_app as scheduler_app
from tests.integration.billing.helpers import ended, fetchval, host_exited, host_started, placed, started
from tests.integration.bus_fixtures import publish
from tests.integration.scheduler.helpers import capacity_known, create_tenant, register_gpus, settings, spec
from tests.integration.support import ADMIN_HEADERS, Isolation, eventually, running


def _billing(iso: Isolation) -> BillingSettings:
    return iso.settings(BillingSettings, "billing", accrual_interval_s=3600, usage_publish_interval_s=3600)


async def _charge(iso: Isolation, placement_id: str, *, start: datetime, end: datetime, project: str) -> None:
    """A job of acme that ran on one A100 from `start` to `end`, as the scheduler and its host said."""
    await publish(
        iso,
        [
            placed(placement_id, at=start, project=project),
            started(placement_id, at=start),
            ended(placement_id, at=end, ended_at=end),
        ],
        topic=topics.SCHEDULER,
    )
    await publish(
        iso,
        [host_started(placement_id, at=start), host_exited(placement_id, at=end)],
        topic=topics.NODE_AGENT,
    )


async def test_a_hard_stop_budget_crossed_in_billing_refuses_the_projects_new_work_with_409(
    isolation: Isolation,
) -> None:
    now = datetime.now(UTC)
    month_start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    start = max(now - timedelta(minutes=10), month_start)  # charged in this month: the one admission checks
    async with (
        running(scheduler_app(settings(isolation))) as scheduler,
        running(billing_app(_billing(isolation))) as billing,
    ):
        headers = await create_tenant(scheduler, "acme")
        budget = {"tenant_id": "acme", "limit_micro": 1, "hard_stop": True}
        put = await billing.put("/v1/budgets/vision", json=budget, headers=ADMIN_HEADERS)
        assert put.status_code == 200, put.text
        before = await scheduler.post("/v1/workloads", json=spec(), headers=headers)
        assert before.status_code == 201, before.text

        await _charge(isolation, "p1", start=start, end=now, project="vision")

        async def refused() -> httpx.Response | None:
            response = await scheduler.post("/v1/workloads", json=spec(), headers=headers)
            return response if response.status_code == 409 else None

        refusal = await eventually(refused, timeout=30, interval=0.5, what="the project's new work refused")
        error = refusal.json()["error"]
        assert error["field"] == "tags.project"
        month = now.strftime("%Y-%m")
        assert f"project 'vision' reached 100% of its {month} budget (hard stop)" in error["message"]
        other = await scheduler.post("/v1/workloads", json=spec(tags={"project": "nlp"}), headers=headers)
        assert other.status_code == 201, other.text  # another project of the tenant is not stopped


async def test_billings_decayed_usage_sets_the_tenants_fair_share_in_the_schedulers_priority(
    isolation: Isolation,
) -> None:
    now = datetime.now(UTC)
    async with (
        running(scheduler_app(settings(isolation))) as scheduler,
        running(billing_app(_billing(isolation))) as billing,
    ):
        headers = await create_tenant(scheduler, "acme")
        await register_gpus(isolation, count=2, model="L4")  # capacity to be entitled to, none it fits
        await capacity_known(scheduler, headers, 2)
        created = await scheduler.post("/v1/workloads", json=spec(), headers=headers)  # waits: an A100 job
        assert created.status_code == 201, created.text
        wid = created.json()["workload_id"]
        before = await _priority(scheduler, wid, headers)
        assert before["decayed_usage_unit_hours"] == 0

        # Two hours on 8 compute units, an hour ago: 16 unit-hours, barely decayed (half-life a week).
        await _charge(
            isolation, "p1", start=now - timedelta(hours=3), end=now - timedelta(hours=1), project="cv"
        )
        await eventually(
            lambda: fetchval(isolation, "SELECT count(*) FROM allocations WHERE status = 'closed'"),
            what="the run charged",
        )
        published = await billing.post("/v1/admin/usage/publish", headers=ADMIN_HEADERS)
        assert published.json() == {"published": 1}
        usage = (await billing.get("/v1/usage/decayed", headers=ADMIN_HEADERS)).json()["tenants"]
        billed = float(usage["acme"])
        assert 15.8 < billed < 16.0

        async def fed() -> dict[str, Any] | None:
            explained = await _priority(scheduler, wid, headers)
            return explained if explained["decayed_usage_unit_hours"] > 0 else None

        after = await eventually(fed, timeout=30, interval=0.5, what="billing's usage in the priority")
        assert abs(after["decayed_usage_unit_hours"] - billed) < 0.01
        assert after["fair_share"] > before["fair_share"]
        assert after["fair_share_term"] < before["fair_share_term"]
        assert after["priority"] < before["priority"]
        assert f"used {billed:.2f}" in after["explanation"]


async def _priority(client: httpx.AsyncClient, wid: str, headers: dict[str, str]) -> dict[str, Any]:
    response = await client.get(f"/v1/workloads/{wid}/priority", headers=headers)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body
