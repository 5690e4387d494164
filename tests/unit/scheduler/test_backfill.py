from datetime import timedelta

from services.scheduler.domain.cluster import Allocation, ClusterState, Grant
from services.scheduler.domain.model import GpuRequest
from services.scheduler.domain.reserved import ReservedPoolConfig
from services.scheduler.domain.schedule import Decisions, QueueEntry, SchedulerConfig, WaitReason, schedule
from tests.unit.scheduler.builders import NOW, entry, node

NO_CAP = ReservedPoolConfig(high_cap=1.0)


def running(wid: str, gpus: range, *, minutes: int | None) -> Allocation:
    grants = tuple(Grant(f"a-gpu{i}", "a", "", 8.0) for i in gpus)
    ends = NOW + timedelta(minutes=minutes) if minutes is not None else None
    return Allocation(wid, "x", grants, 0.5, ends_at=ends)


def run(
    queue: list[QueueEntry], allocations: tuple[Allocation, ...], *, backfill: bool = True, spare: int = 0
) -> Decisions:
    gpus = node("a", count=4) + (node("b", count=spare) if spare else [])
    state = ClusterState(gpus=tuple(gpus), allocations=allocations)
    return schedule(queue, state, now=NOW, config=SchedulerConfig(reserved=NO_CAP, backfill=backfill))


HEAD = GpuRequest(model="A100", count=3)


def test_blocked_head_gets_a_reservation_at_the_earliest_release() -> None:
    decisions = run([entry("head", HEAD, priority=0.9)], (running("r", range(2), minutes=30),))
    head = decisions.waiting[0]
    assert head.reason is WaitReason.CAPACITY
    assert head.estimated_start == NOW + timedelta(minutes=30)
    assert decisions.reservation is not None
    assert len(decisions.reservation.grants) == 3


def test_short_job_backfills_onto_reserved_gpus_when_it_ends_before_the_head_starts() -> None:
    queue = [entry("head", HEAD, priority=0.9), entry("short", priority=0.1, limit_min=20)]
    decisions = run(queue, (running("r", range(2), minutes=30),))
    assert [(p.workload_id, p.backfilled) for p in decisions.placements] == [("short", True)]


def test_long_job_may_not_take_gpus_the_head_is_waiting_for() -> None:
    queue = [entry("head", HEAD, priority=0.9), entry("long", priority=0.1, limit_min=120)]
    decisions = run(queue, (running("r", range(2), minutes=30),))
    assert decisions.placements == ()


def test_job_without_time_limit_only_uses_slots_outside_the_reservation() -> None:
    queue = [entry("head", HEAD, priority=0.9), entry("open", priority=0.1, limit_min=None)]
    decisions = run(queue, (running("r", range(2), minutes=30),), spare=1)
    assert [(p.workload_id, p.nodes) for p in decisions.placements] == [("open", ("b",))]
    reserved = {g.key for g in decisions.reservation.grants} if decisions.reservation else set()
    assert not reserved & {g.key for g in decisions.placements[0].grants}


def test_two_short_jobs_never_borrow_the_same_reserved_gpu() -> None:
    queue = [entry("head", HEAD, priority=0.9)] + [
        entry(f"s{i}", priority=0.1, limit_min=10) for i in range(3)
    ]
    decisions = run(queue, (running("r", range(2), minutes=30),))
    keys = [g.key for p in decisions.placements for g in p.grants]
    assert len(keys) == len(set(keys)) == 2


def test_without_backfill_nothing_passes_a_blocked_head() -> None:
    queue = [entry("head", HEAD, priority=0.9), entry("short", priority=0.1, limit_min=20)]
    decisions = run(queue, (running("r", range(2), minutes=30),), backfill=False)
    assert decisions.placements == ()
    assert [w.position for w in decisions.waiting] == [1, 2]


def test_head_that_can_never_fit_gets_no_estimate() -> None:
    decisions = run(
        [entry("huge", GpuRequest(model="A100", count=3), priority=0.9)],
        (running("r", range(2), minutes=None),),
    )
    assert decisions.waiting[0].estimated_start is None
    assert decisions.reservation is None
