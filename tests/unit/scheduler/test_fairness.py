"""A simulated day on a 16-GPU cluster with two tenants of endless demand, driven only by pure functions.

Tolerances: equal shares must end within 5% of equal GPU-hours; twice the shares must get a GPU-hour ratio
within 1.8..2.2.
"""

from datetime import timedelta

import pytest

from services.scheduler.domain.cluster import Allocation, ClusterState
from services.scheduler.domain.priority import (
    DecayedUsage,
    accrue,
    entitlement,
    fair_share,
    priority,
    usage_at,
)
from services.scheduler.domain.schedule import QueueEntry, schedule
from tests.unit.scheduler.builders import NOW, node, workload

STEP = timedelta(minutes=10)
JOB = timedelta(minutes=60)
GPUS = tuple(node("a") + node("b"))
CAPACITY = sum(g.units for g in GPUS)


def _priorities(shares: dict[str, int], usage: dict[str, DecayedUsage], now: object) -> dict[str, float]:
    total = sum(shares.values())
    out = {}
    for tenant, share in shares.items():
        entitled = entitlement(shares=share, total_shares=total, capacity_units=CAPACITY)
        used = usage_at(usage[tenant], at=now)  # type: ignore[arg-type]
        out[tenant] = priority(urgency=0.5, fair_share=fair_share(decayed=used, entitled=entitled))
    return out


def simulate_day(shares: dict[str, int]) -> dict[str, float]:
    """GPU-hours each tenant received over a simulated day."""
    usage = {t: DecayedUsage(value=0.0, as_of=NOW) for t in shares}
    gpu_hours = dict.fromkeys(shares, 0.0)
    running: list[Allocation] = []
    now, serial = NOW, 0
    while now < NOW + timedelta(days=1):
        for a in running:  # account the step just ended; every job runs whole steps
            usage[a.tenant] = accrue(usage[a.tenant], amount=a.units * STEP.total_seconds() / 3600, at=now)
            gpu_hours[a.tenant] += len(a.grants) * STEP.total_seconds() / 3600
        running = [a for a in running if a.ends_at is not None and a.ends_at > now]
        prio = _priorities(shares, usage, now)
        queue = []
        for tenant in shares:
            for _ in range(20):
                serial += 1
                w = workload(f"{tenant}-{serial}", tenant=tenant, limit_min=60, age_s=-serial)
                queue.append(QueueEntry(workload=w, priority=prio[tenant]))
        decisions = schedule(queue, ClusterState(gpus=GPUS, allocations=tuple(running)), now=now)
        for p in decisions.placements:
            running.append(Allocation(p.workload_id, p.tenant, p.grants, p.priority, ends_at=now + JOB))
        now += STEP
    return gpu_hours


def test_equal_shares_end_within_five_percent_of_equal_gpu_hours() -> None:
    hours = simulate_day({"a": 1, "b": 1})
    assert hours["a"] + hours["b"] == pytest.approx(16 * 24, rel=0.05)  # the cluster stays busy
    assert hours["a"] == pytest.approx(hours["b"], rel=0.05)


def test_twice_the_shares_gets_about_twice_the_gpu_hours() -> None:
    hours = simulate_day({"a": 1, "b": 2})
    assert 1.8 <= hours["b"] / hours["a"] <= 2.2
