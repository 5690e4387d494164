"""Issue 8's acceptance across the whole suite: XID 79 on a GPU running a workload, recovered end to end."""

from __future__ import annotations

from typing import Any

from libs.common.events import topics
from libs.common.events.recovery import IncidentClosedV1, IncidentOpenedV1, IncidentProgressedV1
from libs.common.events.scheduler import WorkloadPlacedV1
from tests.integration.flows.checks import net_charge_periods, overlaps
from tests.integration.flows.journey import NETWORK
from tests.integration.flows.suite import Suite, fleet_gpus
from tests.integration.support import ADMIN_HEADERS, TopicReader, eventually


def _of(events: list[Any], cls: type[Any]) -> list[Any]:
    return [p for _, p in events if isinstance(p, cls)]


# XID 79 and NVML's GPU-lost reading are one fault: whichever signal recovery sees first opens the incident.
GPU_OFF_BUS = ("xid_79", "gpu_lost")


def _xid_incident_closed(events: list[Any]) -> bool:
    xid = {o.incident_id for o in _of(events, IncidentOpenedV1) if o.fault_type in GPU_OFF_BUS}
    return any(c.incident_id in xid for c in _of(events, IncidentClosedV1))


async def _running_placement(suite: Suite, headers: dict[str, str], wid: str, *, not_: str = "") -> str:
    async def running() -> str | None:
        got = (await suite.scheduler.get(f"/v1/workloads/{wid}", headers=headers)).json()
        last[0] = got
        return got["placement_id"] if got["state"] == "running" and got["placement_id"] != not_ else None

    last: list[Any] = [None]
    try:
        return await eventually(
            running, timeout=90, interval=0.3, what=f"{wid} running (not on {not_ or '-'})"
        )
    except AssertionError as exc:
        raise AssertionError(f"{exc}; workload: {last[0]}") from None


async def _placed_on(reader: TopicReader, placement_id: str) -> WorkloadPlacedV1:
    events = await reader.wait_for(
        lambda evs: any(p.placement_id == placement_id for p in _of(evs, WorkloadPlacedV1)), what="placed"
    )
    placed: WorkloadPlacedV1 = next(
        p for p in _of(events, WorkloadPlacedV1) if p.placement_id == placement_id
    )
    return placed


async def test_xid_79_drains_the_node_migrates_the_workload_elsewhere_with_progress_and_bills_no_overlap(
    suite: Suite,
) -> None:
    acme = await suite.create_tenant("acme")
    body = {
        "kind": "instance",
        "image": {"name": "pytorch", "version": "2.3"},
        "resources": {"kind": "gpu", "model": "L4", "count": 1},
        "network": NETWORK,
        "tags": {"project": "notebooks"},
    }
    created = await suite.scheduler.post("/v1/workloads", json=body, headers=acme)
    assert created.status_code == 201, created.text
    wid = created.json()["workload_id"]
    async with suite.reader(topics.SCHEDULER) as sched, suite.reader(topics.RECOVERY) as rec:
        first = await _placed_on(sched, await _running_placement(suite, acme, wid))
        gpu, node = first.allocations[0].gpu_uuid, first.node
        fault = {"gpu_uuid": gpu, "fault": "xid", "xid": 79}
        assert (
            await suite.telemetry.post("/v1/admin/sim/faults", json=fault, headers=ADMIN_HEADERS)
        ).status_code == 202

        events = await rec.wait_for(_xid_incident_closed, timeout=120, what="the XID 79 incident closed")
        second = await _placed_on(sched, await _running_placement(suite, acme, wid, not_=first.placement_id))

    # Drained: the whole node (XID 79 = reboot the node), then returned after the health check.
    history = (await suite.inventory.get(f"/v1/gpus/{gpu}", headers=ADMIN_HEADERS)).json()["health_history"]
    assert "draining" in [h["to_state"] for h in history]
    # Migrated: running on a GPU of another node.
    assert second.node != node
    assert second.allocations[0].gpu_uuid in fleet_gpus()[second.node]
    # Progress: one incident, states in order, the workload's percent rising to 100, closed recovered.
    # One fault, one incident: the GPU-lost reading that follows the XID folds into it.
    opened = _of(events, IncidentOpenedV1)
    assert [(o.gpu_uuid, o.node) for o in opened] == [(gpu, node)]
    assert opened[0].fault_type in GPU_OFF_BUS
    incident = opened[0].incident_id
    progress = [p for p in _of(events, IncidentProgressedV1) if p.incident_id == incident]
    states = [p.state for p in progress if p.workload_id is None]
    assert states == ["detected", "diagnosing", "draining", "migrating", "verifying", "resolved"]
    percents = [p.percent for p in progress if p.workload_id == wid]
    assert percents == sorted(set(percents))
    assert percents[-1] == 100
    assert [c.outcome for c in _of(events, IncidentClosedV1) if c.incident_id == incident] == ["recovered"]
    # Billing: the old allocation closed at the migration and the new one opened then; nothing twice.
    await _billed_once_across_the_migration(suite, wid, first.placement_id, second.placement_id)


async def _billed_once_across_the_migration(suite: Suite, wid: str, old: str, new: str) -> None:
    query = "SELECT placement_id, status, started_at, ended_at FROM allocations WHERE workload_id = $1"

    async def both() -> dict[str, Any] | None:
        rows = {r["placement_id"]: r for r in await suite.sql("billing", query, wid)}
        return rows if rows.get(old) and rows[old]["status"] == "closed" and new in rows else None

    rows = await eventually(both, timeout=30, interval=0.5, what="old allocation closed, new one open")
    assert rows[new]["status"] == "open"
    # Closed and opened by events of one scheduler transaction sharing one instant: no gap, no overlap.
    assert rows[old]["ended_at"] == rows[new]["started_at"]

    async def charged_after_migration() -> bool:
        return any(a.startswith(new) for a, _, _ in await net_charge_periods(suite, wid))

    await eventually(charged_after_migration, timeout=30, interval=0.5, what="the new placement charged")
    assert overlaps(await net_charge_periods(suite, wid)) == []
    reconciliation = (await suite.billing.get("/v1/admin/reconciliation", headers=ADMIN_HEADERS)).json()
    assert reconciliation["equal"], reconciliation
