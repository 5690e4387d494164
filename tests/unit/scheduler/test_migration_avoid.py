"""A migration's avoided GPUs close them to that workload alone, only while it migrates."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from services.scheduler.adapters.catalog_loader import load_default_catalog
from services.scheduler.domain.cluster import Allocation, ClusterState, Grant
from services.scheduler.domain.creation import parse_spec
from services.scheduler.domain.priority import FairShareBook
from services.scheduler.domain.reserved import ReservedPoolConfig
from services.scheduler.domain.schedule import Decisions, QueueEntry, SchedulerConfig, schedule
from services.scheduler.domain.stored import StoredWorkload, WaitingWorkload
from services.scheduler.service.pass_inputs import PassCache, queue_entry
from tests.unit.scheduler.builders import NOW, entry, node

CONFIG = SchedulerConfig(reserved=ReservedPoolConfig(high_cap=1.0), preemption_grace=timedelta(minutes=2))
#: Two free GPUs: a-gpu0 is the one best fit takes first.
GPUS = tuple(node("a", count=2))


def moving(wid: str, *, priority: float) -> QueueEntry:
    """A migrating workload moving away from a-gpu0."""
    return replace(entry(wid, priority=priority), avoid_gpus=frozenset({"a-gpu0"}))


def holder(wid: str, gpu: int, *, priority: float, ends_in_min: int | None = None) -> Allocation:
    ends = NOW + timedelta(minutes=ends_in_min) if ends_in_min else None
    return Allocation(wid, "spot", (Grant(f"a-gpu{gpu}", "a", "", 8.0),), priority, True, ends)


def run(queue: list[QueueEntry], allocations: tuple[Allocation, ...] = ()) -> Decisions:
    return schedule(queue, ClusterState(gpus=GPUS, allocations=allocations), now=NOW, config=CONFIG)


def test_a_migration_is_never_placed_on_the_gpu_it_leaves_while_others_may_use_it() -> None:
    decisions = run([moving("mover", priority=0.9), entry("other", priority=0.5)])
    placed = {p.workload_id: p.grants[0].gpu for p in decisions.placements}
    assert placed == {"mover": "a-gpu1", "other": "a-gpu0"}


def test_a_migration_preempts_no_one_on_the_gpu_it_leaves() -> None:
    holders = (holder("v0", 0, priority=0.2), holder("v1", 1, priority=0.3))
    decisions = run([moving("mover", priority=0.9)], holders)
    assert [p.victim_id for p in decisions.preemptions] == ["v1"]


def test_a_migrations_reservation_waits_for_a_gpu_it_may_use() -> None:
    holders = (holder("v0", 0, priority=0.3, ends_in_min=10), holder("v1", 1, priority=0.3, ends_in_min=20))
    decisions = run([moving("mover", priority=0.4)], holders)
    assert decisions.reservation is not None
    assert decisions.reservation.start == NOW + timedelta(minutes=20)


BOOK = FairShareBook(
    usage={},
    shares={},
    tenants=frozenset({"acme"}),
    default_shares=1.0,
    capacity_units=16.0,
    half_life=timedelta(days=7),
    now=NOW,
)
SPEC = {
    "kind": "job",
    "image": {"name": "pytorch", "version": "2.4"},
    "resources": {"kind": "gpu", "model": "A100", "count": 1},
    "network": {"vpc_id": "vpc-main1", "subnet_id": "subnet-a001", "security_group_id": "sg-default"},
}


def stored(state: str) -> StoredWorkload:
    """A workload that migrated once (its pin and avoided GPU still on the row, as rows before the fix
    kept them for life)."""
    return StoredWorkload(
        workload_id="w1",
        tenant_id="acme",
        kind="job",
        state=state,
        spec=parse_spec(SPEC, catalog=load_default_catalog()).model_dump(mode="json"),
        urgency=0.0,
        preemptible=True,
        tags={},
        submitted_at=NOW,
        priority=0.9,
        pinned_priority=0.9,
        avoid_gpus=["a-gpu0"],
        wait_reason=None,
        position=None,
        estimated_start=None,
        placement_id=None,
        ended_at=None,
        outcome=None,
        reason="",
        traceparent=None,
    )


def _entry(row: StoredWorkload) -> QueueEntry:
    """The row's queue entry as a pass makes it: its request kept in the pass's cache, then its waiting
    fields read."""
    cache = PassCache()
    cache.keep(row)
    return queue_entry(WaitingWorkload.of(row), cache=cache, book=BOOK)


def test_only_a_migrating_workload_keeps_its_pinned_priority_and_avoids_the_gpus_it_leaves() -> None:
    during = _entry(stored("migrating"))
    requeued = _entry(stored("queued"))
    assert (during.priority, during.avoid_gpus) == (0.9, frozenset({"a-gpu0"}))
    fair = BOOK.explain(tenant="acme", urgency=0.0).priority
    assert (requeued.priority, requeued.avoid_gpus) == (fair, frozenset())
    assert fair != 0.9
