"""Reconciliation checks the ledger against the hosts' own facts, not only against billing's records.

The scheduler is down while a job finishes: the node agent's exit is on its topic (billing reads it
there itself), the scheduler's end comes when it is back. On the old rule (an end with no time of its
own, charged when it was sent) the ledger agrees with billing's own records, yet over-charges what
the host ran; the check against the hosts says so, per placement. On the new rule (the end carries the
host's exit) the same outage leaves nothing to report.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from libs.common.events import topics
from services.billing.app import create_app
from services.billing.domain.rating import floor_to_grid
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
from tests.integration.support import ADMIN_HEADERS, Isolation, eventually, running

A100_OD = 500_000  # seeded micro per unit-hour


async def test_an_end_charged_when_the_scheduler_came_back_is_reported_against_the_hosts_exit(
    isolation: Isolation,
) -> None:
    settings = isolation.settings(BillingSettings, "billing", accrual_interval_s=3600)
    t0 = floor_to_grid(datetime.now(UTC)) - timedelta(minutes=30)
    exited, back = t0 + timedelta(minutes=5), t0 + timedelta(minutes=30)
    async with running(create_app(settings)) as client:
        # Two jobs that ran from t0 and exited at 00:05 on their hosts, each billed by its own project.
        await publish(
            isolation,
            [
                placed("old", at=t0, project="old-rule"),
                placed("new", at=t0, project="new-rule"),
                started("old", at=t0),
                started("new", at=t0),
            ],
            topic=topics.SCHEDULER,
        )
        reports = [host_started(p, at=t0) for p in ("old", "new")] + [
            host_exited(p, at=exited) for p in ("old", "new")
        ]
        await publish(isolation, reports, topic=topics.NODE_AGENT)
        await eventually(lambda: _count(isolation, "allocations WHERE running", 2), what="both running")
        await eventually(lambda: _count(isolation, "host_facts", 4), what="the hosts' reports")

        # The scheduler is down: accrual goes on charging both past their exits, and the check says so.
        assert (await client.post("/v1/admin/accrual", headers=ADMIN_HEADERS)).json() == {"rated": 2}
        during = await _reconciliation(client)
        assert during["equal"] is False
        assert {p["placement_id"] for p in during["hosts"]["placements"]} == {"old", "new"}

        # Back, the scheduler sends the ends: the old rule's without a time, the new one's with the exit.
        await publish(
            isolation,
            [ended("old", at=back), ended("new", at=back, ended_at=exited)],
            topic=topics.SCHEDULER,
        )
        await eventually(lambda: _count(isolation, "allocations WHERE status = 'closed'", 2), what="ends")

        five = expected_micro(units=8, seconds=[60] * 5, micro_per_unit_hour=A100_OD)
        thirty = expected_micro(units=8, seconds=[60] * 30, micro_per_unit_hour=A100_OD)
        assert await ledger_total(isolation, "acme", "new-rule") == five  # the overrun reversed
        assert await ledger_total(isolation, "acme", "old-rule") == thirty  # charged to the late end

        after = await _reconciliation(client)
        # The ledger agrees with billing's own records (what the old check compared) ...
        assert (after["differences"], after["missing_keys"], after["unexpected_keys"]) == ([], [], [])
        # ... but not with what the host ran: the over-charge, for the one placement on the old rule.
        assert after["equal"] is False
        assert after["hosts"]["equal"] is False
        assert after["hosts"]["placements_checked"] == 2
        assert after["hosts"]["difference_micro"] == thirty - five
        [report] = after["hosts"]["placements"]
        assert report == {
            "placement_id": "old",
            "workload_id": "wl-old",
            "tenant_id": "acme",
            "project": "old-rule",
            "host_started_at": t0.isoformat(),
            "host_ended_at": exited.isoformat(),
            "end_basis": "host_exit",
            "billed_started_at": t0.isoformat(),
            "billed_ended_at": back.isoformat(),
            "expected_micro": five,
            "ledger_micro": thirty,
            "difference_micro": thirty - five,
        }


async def _reconciliation(client: Any) -> dict[str, Any]:
    response = await client.get("/v1/admin/reconciliation", headers=ADMIN_HEADERS)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def _count(iso: Isolation, where: str, n: int) -> bool:
    return await fetchval(iso, f"SELECT count(*) FROM {where}") == n
