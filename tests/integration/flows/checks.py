"""Cross-service consistency checks: ledger vs lifecycle, quotas vs placements, charges never doubled."""

from __future__ import annotations

import itertools
from datetime import datetime
from typing import Any

from libs.common.events import Envelope, Event
from libs.common.events.scheduler import WorkloadPlacedV1
from tests.integration.flows.suite import Suite
from tests.integration.support import ADMIN_HEADERS, eventually

__all__ = [
    "allocations_match_placements",
    "dead_lettered",
    "net_charge_periods",
    "overlaps",
    "placements_once",
    "quotas_and_allocations_agree",
]

LIVE_PLACEMENTS = "SELECT placement_id, tenant_id, gpus, units_milli FROM placements WHERE ended_at IS NULL"
OPEN_ALLOCATIONS = "SELECT DISTINCT placement_id FROM allocations WHERE status = 'open'"


async def net_charge_periods(suite: Suite, workload_id: str) -> list[tuple[str, str, str]]:
    """(allocation, period start, period end) of every charge line of a workload not reversed."""
    rows = (await suite.billing.get(f"/v1/charges?workload_id={workload_id}", headers=ADMIN_HEADERS)).json()
    reversed_ids = {r["reverses_entry_id"] for r in rows if r["reverses_entry_id"]}
    return sorted(
        (r["allocation_id"], r["period_start"], r["period_end"])
        for r in rows
        if not r["reverses_entry_id"] and r["entry_id"] not in reversed_ids
    )


def overlaps(periods: list[tuple[str, str, str]]) -> list[tuple[Any, Any]]:
    """Pairs of charge periods that overlap in time (the same time charged twice)."""
    spans = sorted((datetime.fromisoformat(p[1]), datetime.fromisoformat(p[2]), p[0]) for p in periods)
    return [(a, b) for a, b in itertools.pairwise(spans) if b[0] < a[1]]


async def _quota_matches(suite: Suite, tenants: list[str]) -> str | None:
    live = await suite.sql("scheduler", LIVE_PLACEMENTS)
    problems = []
    for tenant in tenants:
        quota = (await suite.scheduler.get(f"/v1/admin/tenants/{tenant}/quota", headers=ADMIN_HEADERS)).json()
        mine = [r for r in live if r["tenant_id"] == tenant]
        expected = {"gpus": float(sum(r["gpus"] for r in mine)), "workloads": float(len(mine))}
        expected["units"] = sum(r["units_milli"] for r in mine) / 1000
        if quota["usage"] != expected:
            problems.append(f"{tenant}: quota usage {quota['usage']} but live placements {expected}")
    opened = {r["placement_id"] for r in await suite.sql("billing", OPEN_ALLOCATIONS)}
    if opened != {r["placement_id"] for r in live}:
        problems.append(
            f"billing open {sorted(opened)} vs scheduler live {sorted(r['placement_id'] for r in live)}"
        )
    return "; ".join(problems) or None


async def quotas_and_allocations_agree(suite: Suite, tenants: list[str]) -> None:
    """The scheduler's quota usage equals its live placements, and billing has exactly those open."""
    last: list[str | None] = [None]

    async def agree() -> bool:
        last[0] = await _quota_matches(suite, tenants)
        return last[0] is None

    try:
        await eventually(
            agree, timeout=30, interval=0.5, what="quotas, placements and open allocations agree"
        )
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {last[0]}") from None


async def placements_once(
    suite: Suite, events: list[tuple[Envelope, Event]], workload_ids: set[str]
) -> dict[str, int]:
    """Each workload has exactly one placement, in the scheduler's table and on its topic (one event id,
    however often it was sent); returns what was counted, or raises naming the workloads that differ."""
    rows = await suite.sql("scheduler", "SELECT workload_id, placement_id FROM placements")
    stored: dict[str, set[str]] = {}
    for row in rows:
        stored.setdefault(row["workload_id"], set()).add(row["placement_id"])
    placed: dict[str, set[str]] = {}
    event_ids: dict[str, set[str]] = {}
    sent = 0
    for env, payload in events:
        if isinstance(payload, WorkloadPlacedV1) and payload.workload_id in workload_ids:
            placed.setdefault(payload.workload_id, set()).add(payload.placement_id)
            event_ids.setdefault(payload.placement_id, set()).add(env.id)
            sent += 1
    wrong = {
        w: (sorted(stored.get(w, ())), sorted(placed.get(w, ())))
        for w in workload_ids
        if len(stored.get(w, ())) != 1 or stored.get(w) != placed.get(w)
    }
    assert not wrong, f"workload -> (stored placements, placed events) not exactly one each: {wrong}"
    doubled = {p: sorted(ids) for p, ids in event_ids.items() if len(ids) != 1}
    assert not doubled, f"placements published as more than one event: {doubled}"
    return {"placements": len(event_ids), "placed_events_on_the_wire": sent}


async def allocations_match_placements(suite: Suite) -> str | None:
    """None when billing holds one allocation per scheduler placement, open exactly while it is live."""
    placements = {
        r["placement_id"]: r["ended_at"] is None
        for r in await suite.sql("scheduler", "SELECT placement_id, ended_at FROM placements")
    }
    rows = await suite.sql("billing", "SELECT placement_id, status FROM allocations")
    allocations = {r["placement_id"]: r["status"] == "open" for r in rows}
    if len(rows) != len(allocations):
        return f"{len(rows)} allocation rows for {len(allocations)} placements"
    return None if allocations == placements else f"billing {allocations} vs scheduler {placements}"


async def dead_lettered(suite: Suite, service: str, topic: str) -> set[tuple[int, int]]:
    """(partition, offset) of every record of a logical topic that a service's consumers dead-lettered."""
    query = 'SELECT partition, "offset" FROM dead_letters WHERE topic = $1'
    return {(r["partition"], r["offset"]) for r in await suite.sql(service, query, topic)}
