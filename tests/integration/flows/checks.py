"""Cross-service consistency checks: ledger vs lifecycle, quotas vs placements, charges never doubled."""

from __future__ import annotations

import itertools
from datetime import datetime
from typing import Any

from tests.integration.flows.suite import Suite
from tests.integration.support import ADMIN_HEADERS, eventually

__all__ = ["net_charge_periods", "overlaps", "quotas_and_allocations_agree"]

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
