from datetime import timedelta

from services.scheduler.domain.cluster import Allocation, ClusterState, Grant
from services.scheduler.domain.model import GpuRequest, WorkloadState
from services.scheduler.domain.preemption import deadline_passed, may_preempt, requeue_preempted
from services.scheduler.domain.reserved import ReservedPoolConfig
from services.scheduler.domain.schedule import Decisions, QueueEntry, SchedulerConfig, WaitReason, schedule
from tests.unit.scheduler.builders import NOW, entry, node, workload

CONFIG = SchedulerConfig(reserved=ReservedPoolConfig(high_cap=1.0), preemption_grace=timedelta(minutes=2))


def holder(wid: str, gpu: int, *, priority: float, preemptible: bool) -> Allocation:
    return Allocation(wid, "spot", (Grant(f"a-gpu{gpu}", "a", "", 8.0),), priority, preemptible)


def run(queue: list[QueueEntry], allocations: tuple[Allocation, ...]) -> Decisions:
    state = ClusterState(gpus=tuple(node("a", count=2)), allocations=allocations)
    return schedule(queue, state, now=NOW, config=CONFIG)


def test_high_priority_work_preempts_preemptible_lower_priority_work_with_a_deadline() -> None:
    allocs = (
        holder("spot1", 0, priority=0.2, preemptible=True),
        holder("spot2", 1, priority=0.3, preemptible=True),
    )
    decisions = run([entry("vip", priority=0.9)], allocs)
    [proposal] = decisions.preemptions
    assert (proposal.victim_id, proposal.for_workload_id) == ("spot1", "vip")
    assert proposal.deadline == NOW + timedelta(minutes=2)
    assert decisions.waiting[0].reason is WaitReason.PREEMPTING


def test_non_preemptible_work_is_never_preempted() -> None:
    allocs = (
        holder("firm1", 0, priority=0.1, preemptible=False),
        holder("firm2", 1, priority=0.1, preemptible=False),
    )
    decisions = run([entry("vip", priority=1.0)], allocs)
    assert decisions.preemptions == ()


def test_low_priority_work_cannot_preempt() -> None:
    allocs = (
        holder("s1", 0, priority=0.1, preemptible=True),
        holder("s2", 1, priority=0.1, preemptible=True),
    )
    assert run([entry("meh", priority=0.3)], allocs).preemptions == ()


def test_equal_priority_is_not_enough_to_preempt() -> None:
    victim = holder("s1", 0, priority=0.7, preemptible=True)
    assert not may_preempt(priority=0.7, victim=victim, high_threshold=0.5)


def test_gang_preempts_only_what_it_needs_and_uses_free_gpus_first() -> None:
    allocs = (holder("s1", 0, priority=0.2, preemptible=True),)
    decisions = run([entry("vip", GpuRequest(model="A100", count=2), priority=0.9)], allocs)
    assert [p.victim_id for p in decisions.preemptions] == ["s1"]


def test_freed_gpus_are_not_given_to_lower_priority_work_in_the_same_pass() -> None:
    allocs = (holder("s1", 0, priority=0.2, preemptible=True),)
    queue = [entry("vip", GpuRequest(model="A100", count=2), priority=0.9), entry("other", priority=0.1)]
    decisions = run(queue, allocs)
    assert decisions.placements == ()


def test_a_victim_is_proposed_once_per_pass() -> None:
    allocs = (
        holder("s1", 0, priority=0.2, preemptible=True),
        holder("firm", 1, priority=0.1, preemptible=False),
    )
    decisions = run([entry("v1", priority=0.9), entry("v2", priority=0.8)], allocs)
    assert [p.for_workload_id for p in decisions.preemptions] == ["v1"]


def test_work_already_leaving_is_not_preempted_again() -> None:
    leaving = Allocation("s1", "spot", (Grant("a-gpu0", "a", "", 8.0),), 0.1, True, None, NOW)
    assert not may_preempt(priority=0.9, victim=leaving, high_threshold=0.5)


def test_grace_period_ends_at_the_deadline() -> None:
    allocs = (
        holder("s1", 0, priority=0.2, preemptible=True),
        holder("s2", 1, priority=0.2, preemptible=True),
    )
    [proposal] = run([entry("vip", priority=0.9)], allocs).preemptions
    assert not deadline_passed(proposal, now=NOW + timedelta(minutes=1))
    assert deadline_passed(proposal, now=NOW + timedelta(minutes=2))


def test_preempted_running_job_is_requeued() -> None:
    job = workload("j").model_copy(update={"state": WorkloadState.RUNNING})
    assert requeue_preempted(job).state is WorkloadState.QUEUED
