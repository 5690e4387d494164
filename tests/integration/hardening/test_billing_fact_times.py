"""Charges follow what the host reports, through the real scheduler and billing (issue 17, items 10 and 14).

The scheduler and billing run in this process on one test's slice; a stand-in node agent reports with its
own instants (as the real agent stamps each report with the runner's). One job of acme:
- runs on its first GPU: charged from the host's start, not from its placement;
- is migrated: its new placement is not charged before the host runs it there, and the old one is
  charged until that same instant (one fact time for both sides, no gap, no overlap);
- exits while the scheduler is down: billing, whose accrual charged on meanwhile, ends the charge at the
  host's exit once the scheduler is back, the very instant the scheduler stored as the workload's end;
  the reconciliation against the hosts' facts says so.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, TypedDict

import asyncpg

from libs.common.events import envelop, topics
from libs.common.events.agent import MigrationStepV1, WorkloadExitedV1, WorkloadStartedV1
from libs.common.events.recovery import MigrationRequestedV1
from libs.common.events.scheduler import WorkloadPlacedV1
from services.billing.app import create_app as billing_app
from services.billing.domain.rating import floor_to_grid
from services.billing.settings import BillingSettings
from services.scheduler.app import create_app as scheduler_app
from tests.integration.bus_fixtures import publish
from tests.integration.scheduler.helpers import (
    capacity_known,
    create_tenant,
    of_workload,
    register_gpus,
    scheduler_reader,
    settings,
    spec,
)
from tests.integration.support import ADMIN_HEADERS, Isolation, TopicReader, eventually, running


async def _rows(iso: Isolation, service: str, sql: str, *args: object) -> list[dict[str, Any]]:
    conn = await asyncpg.connect(iso.infra.database_url, server_settings={"search_path": iso.schema(service)})
    try:
        return [dict(r) for r in await conn.fetch(sql, *args)]
    finally:
        await conn.close()


async def _allocations(iso: Isolation, wid: str) -> dict[str, dict[str, Any]]:
    rows = await _rows(
        iso,
        "billing",
        "SELECT placement_id, status, running, started_at, ended_at, end_reason FROM allocations "
        "WHERE workload_id = $1",
        wid,
    )
    return {r["placement_id"]: r for r in rows}


async def _charged(iso: Isolation, allocation_prefix: str) -> int:
    rows = await _rows(
        iso,
        "billing",
        "SELECT coalesce(sum(amount_micro), 0) AS net FROM journal_entries WHERE allocation_id LIKE $1",
        f"{allocation_prefix}/%",
    )
    return int(rows[0]["net"])


async def _placement(reader: TopicReader, wid: str, *, not_: str | None = None) -> WorkloadPlacedV1:
    def placements(events: list[Any]) -> list[WorkloadPlacedV1]:
        return [
            p for p in of_workload(events, wid) if isinstance(p, WorkloadPlacedV1) and p.placement_id != not_
        ]

    events = await reader.wait_for(lambda evs: bool(placements(evs)), timeout=30, what="a placement")
    return placements(events)[0]


class _Ids(TypedDict):
    """Which report: the fields every node agent report about a workload carries."""

    workload_id: str
    tenant_id: str
    placement_id: str
    node: str


def _ids(placed: WorkloadPlacedV1) -> _Ids:
    return {
        "workload_id": placed.workload_id,
        "tenant_id": placed.tenant_id,
        "placement_id": placed.placement_id,
        "node": placed.node,
    }


async def _agent(iso: Isolation, payload: Any, *, sent: datetime) -> None:
    """The node agent's report, sent at `sent` (its own instant is in the payload's `at`)."""
    await publish(iso, [envelop(payload, source="/gpucloud/node-agent", time=sent)], topic=topics.NODE_AGENT)


async def test_a_job_is_charged_from_the_hosts_start_across_a_move_to_its_exit_during_a_scheduler_outage(
    isolation: Isolation,
) -> None:
    billing = billing_app(isolation.settings(BillingSettings, "billing", accrual_interval_s=3600))
    now = floor_to_grid(datetime.now(UTC))
    # The host's instants, in the recent past so that accrual has rated past each of them.
    began, resumed, exited = (
        now - timedelta(minutes=20),
        now - timedelta(minutes=12),
        now - timedelta(minutes=4),
    )
    async with running(billing) as bill, scheduler_reader(isolation) as reader:
        async with running(scheduler_app(settings(isolation))) as sched:
            headers = await create_tenant(sched, "acme")
            await register_gpus(isolation, count=2)
            await capacity_known(sched, headers, 2)
            created = await sched.post("/v1/workloads", json=spec(time_limit_s=None), headers=headers)
            assert created.status_code == 201, created.text
            wid = created.json()["workload_id"]
            first = await _placement(reader, wid)
            await eventually(lambda: _allocations(isolation, wid), what="the placement held in billing")
            assert (await bill.post("/v1/admin/accrual", headers=ADMIN_HEADERS)).json() == {"rated": 0}

            # The host starts it; the report reaches the scheduler a while later.
            await _agent(
                isolation, WorkloadStartedV1(**_ids(first), at=began), sent=began + timedelta(seconds=9)
            )

            async def running_in_billing() -> bool:
                row = (await _allocations(isolation, wid)).get(first.placement_id)
                return bool(row and row["running"])

            await eventually(running_in_billing, what="charged from the host's start")
            assert (await _allocations(isolation, wid))[first.placement_id]["started_at"] == began

            # Recovery moves it: the scheduler places it again; the host there runs it only later.
            gpu = first.allocations[0].gpu_uuid
            move = MigrationRequestedV1(
                incident_id="inc-1", workload_id=wid, tenant_id="acme", away_from_gpu=gpu
            )
            await publish(isolation, [envelop(move, source="test")], topic=topics.RECOVERY)
            second = await _placement(reader, wid, not_=first.placement_id)
            await eventually(
                lambda: _has(_allocations(isolation, wid), second.placement_id), what="the new placement held"
            )
            await bill.post("/v1/admin/accrual", headers=ADMIN_HEADERS)
            held = await _allocations(isolation, wid)
            assert (held[second.placement_id]["status"], held[second.placement_id]["running"]) == (
                "open",
                False,
            )
            assert held[first.placement_id]["status"] == "open"  # still where it last ran
            assert await _charged(isolation, second.placement_id) == 0, "not charged before it runs there"

            step = MigrationStepV1(**_ids(second), phase="running", percent=100, at=resumed)
            await _agent(isolation, step, sent=resumed + timedelta(seconds=3))

            async def moved() -> dict[str, dict[str, Any]] | None:
                rows = await _allocations(isolation, wid)
                return rows if rows[first.placement_id]["status"] == "closed" else None

            rows = await eventually(moved, what="the old placement closed where the new one runs")
            assert rows[first.placement_id]["ended_at"] == rows[second.placement_id]["started_at"] == resumed
            assert rows[first.placement_id]["end_reason"] == "migrated"

        # The scheduler is down when the job exits on its host; billing reads the host's report itself
        # and accrual charges on past the exit until the scheduler is back.
        await _agent(isolation, WorkloadExitedV1(**_ids(second), outcome="completed", at=exited), sent=exited)
        await eventually(lambda: _host_exit_kept(isolation), what="the host's exit kept by billing")
        assert (await bill.post("/v1/admin/accrual", headers=ADMIN_HEADERS)).json() == {"rated": 1}
        during = (await bill.get("/v1/admin/reconciliation", headers=ADMIN_HEADERS)).json()
        assert during["equal"] is False
        [over] = during["hosts"]["placements"]
        assert (over["placement_id"], over["end_basis"]) == (second.placement_id, "host_exit")
        assert over["difference_micro"] > 0

        async with running(scheduler_app(settings(isolation))):  # back: it reads the exit and ends it

            async def ended() -> dict[str, dict[str, Any]] | None:
                rows = await _allocations(isolation, wid)
                return rows if rows[second.placement_id]["status"] == "closed" else None

            rows = await eventually(ended, timeout=30, what="the end applied in billing")
        [workload] = await _rows(
            isolation, "scheduler", "SELECT ended_at FROM workloads WHERE workload_id = $1", wid
        )
        assert rows[second.placement_id]["ended_at"] == exited == workload["ended_at"]  # one instant
        after = (await bill.get("/v1/admin/reconciliation", headers=ADMIN_HEADERS)).json()
        assert after["equal"] is True, after
        assert after["hosts"]["placements_checked"] == 2


async def _has(rows: Any, placement_id: str) -> bool:
    return placement_id in await rows


async def _host_exit_kept(iso: Isolation) -> bool:
    rows = await _rows(iso, "billing", "SELECT count(*) AS n FROM host_facts WHERE kind = 'exited'")
    return bool(rows[0]["n"] == 1)
