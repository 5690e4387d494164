"""Blocked work on one GPU model never holds back work on another, and a waiting workload says why."""

from datetime import timedelta

from services.scheduler.domain.cluster import Allocation, ClusterState, GpuView, Grant
from services.scheduler.domain.model import GpuRequest, UnitsRequest
from services.scheduler.domain.schedule import Decisions, QueueEntry, SchedulerConfig, WaitReason, schedule
from tests.unit.scheduler.builders import NOW, entry, node

TRAINING = {"pool": "training"}
H100_UNITS = 18.26
EIGHT_H100 = GpuRequest(model="H100", count=8)
ONE_A100 = GpuRequest(model="A100", count=1)


def training_pool(*, a100_nodes: int = 1, h100_nodes: int = 2) -> list[GpuView]:
    gpus: list[GpuView] = []
    for n in range(a100_nodes):
        gpus += node(f"a100-{n}", labels=TRAINING)
    for n in range(h100_nodes):
        gpus += node(f"h100-{n}", model="H100", units=H100_UNITS, labels=TRAINING)
    return gpus


def holding(wid: str, gpus: list[GpuView], *, priority: float, minutes: int | None = 120) -> Allocation:
    grants = tuple(Grant(g.uuid, g.node, "", g.units) for g in gpus)
    ends = NOW + timedelta(minutes=minutes) if minutes is not None else None
    return Allocation(wid, "big", grants, priority, ends_at=ends)


def busy_h100(gpus: list[GpuView], *, priority: float = 0.9) -> tuple[Allocation, ...]:
    nodes = sorted({g.node for g in gpus if g.model == "H100"})
    return tuple(
        holding(f"run-{n}", [g for g in gpus if g.node == n], priority=priority, minutes=60 * (i + 1))
        for i, n in enumerate(nodes)
    )


def blocked_h100_jobs() -> list[QueueEntry]:
    """8xH100 jobs waiting at high and at low priority, older than everything else."""
    return [
        entry("h100-high", EIGHT_H100, priority=0.9, age_s=600),
        entry("h100-low-1", EIGHT_H100, priority=0.3, age_s=500),
        entry("h100-low-2", EIGHT_H100, priority=0.3, age_s=400),
    ]


def run(
    gpus: list[GpuView],
    queue: list[QueueEntry],
    allocations: tuple[Allocation, ...],
    *,
    config: SchedulerConfig | None = None,
) -> Decisions:
    state = ClusterState(gpus=tuple(gpus), allocations=allocations)
    return schedule(queue, state, now=NOW, config=config)


def reasons(decisions: Decisions) -> dict[str, WaitReason]:
    return {w.workload_id: w.reason for w in decisions.waiting}


def test_high_priority_a100_job_is_placed_while_low_priority_work_waits_only_for_h100s() -> None:
    # The H100s (292 of the pool's 356 units) are held by high-priority work: over 80% of the pool. The low
    # work waiting can only use H100s, so keeping A100s free for it would help nobody.
    gpus = training_pool()
    queue = [*blocked_h100_jobs(), entry("a100", ONE_A100, priority=0.7)]
    decisions = run(gpus, queue, busy_h100(gpus))
    assert [p.workload_id for p in decisions.placements] == ["a100"]
    assert decisions.placements[0].grants[0].gpu.startswith("a100-")
    assert set(reasons(decisions).values()) == {WaitReason.CAPACITY}


def test_high_priority_work_still_leaves_a_fifth_of_a_model_to_low_work_waiting_for_it() -> None:
    gpus = training_pool(a100_nodes=2, h100_nodes=1)
    held_a100 = holding("run-a100", [g for g in gpus if g.model == "A100"][:13], priority=0.9)
    queue = [
        *blocked_h100_jobs(),
        entry("a100-high", ONE_A100, priority=0.7, age_s=60),
        entry("a100-low", GpuRequest(model="A100", count=3), priority=0.2),
    ]
    decisions = run(gpus, queue, (*busy_h100(gpus), held_a100))
    assert [p.workload_id for p in decisions.placements] == ["a100-low"]
    assert reasons(decisions)["a100-high"] is WaitReason.RESERVED_POOL


def test_low_work_that_could_use_a100s_keeps_the_a100_reserve_contended() -> None:
    gpus = training_pool(a100_nodes=2, h100_nodes=1)
    held_a100 = holding("run-a100", [g for g in gpus if g.model == "A100"][:13], priority=0.9)
    queue = [
        *blocked_h100_jobs(),
        entry("a100-high", ONE_A100, priority=0.7, age_s=60),
        entry("units-low", UnitsRequest(units=24), priority=0.2),
    ]
    decisions = run(gpus, queue, (*busy_h100(gpus), held_a100))
    assert [p.workload_id for p in decisions.placements] == ["units-low"]
    assert reasons(decisions)["a100-high"] is WaitReason.RESERVED_POOL


def test_a_refusal_by_the_reserve_names_the_reserve_while_a_fitting_gpu_is_free() -> None:
    gpus = training_pool(a100_nodes=1, h100_nodes=0)
    held = holding("run-a100", [g for g in gpus if g.model == "A100"][:7], priority=0.9)
    queue = [
        entry("high", ONE_A100, priority=0.8),
        entry("low", GpuRequest(model="A100", count=2), priority=0.1),
    ]
    decisions = run(gpus, queue, (held,))
    assert reasons(decisions) == {"high": WaitReason.RESERVED_POOL, "low": WaitReason.CAPACITY}
    assert decisions.placements == ()


def test_the_blocked_h100_head_reserves_only_h100s_and_a100_work_without_a_time_limit_passes() -> None:
    gpus = training_pool()
    queue = [*blocked_h100_jobs(), entry("a100", ONE_A100, priority=0.7, limit_min=None)]
    decisions = run(gpus, queue, busy_h100(gpus))
    assert decisions.reservation is not None
    assert decisions.reservation.workload_id == "h100-high"
    assert {g.node for g in decisions.reservation.grants} == {"h100-0"}
    assert [p.workload_id for p in decisions.placements] == ["a100"]


def test_without_backfill_a_blocked_h100_job_holds_back_only_work_that_could_use_h100s() -> None:
    gpus = training_pool()
    queue = [
        *blocked_h100_jobs(),
        entry("a100", ONE_A100, priority=0.2, age_s=10),
        entry("one-h100", GpuRequest(model="H100", count=1), priority=0.2),
    ]
    busy = busy_h100(gpus)
    freed = (busy[0], holding("run-part", [g for g in gpus if g.node == "h100-1"][:7], priority=0.9))
    decisions = run(gpus, queue, freed, config=SchedulerConfig(backfill=False))
    assert [p.workload_id for p in decisions.placements] == ["a100"]
    assert reasons(decisions)["one-h100"] is WaitReason.CAPACITY
