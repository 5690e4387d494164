from collections import Counter
from collections.abc import Mapping

import pytest

from services.scheduler.domain.cluster import Allocation, ClusterState, GpuView, Grant, SlotKind
from services.scheduler.domain.errors import StateConflict
from services.scheduler.domain.index import FreeIndex
from services.scheduler.domain.model import (
    GangPolicy,
    GpuRequest,
    MigRequest,
    ResourceRequest,
    UnitsRequest,
    WorkloadKind,
)
from services.scheduler.domain.quota import QuotaLimits
from services.scheduler.domain.reserved import ReservedPoolConfig
from services.scheduler.domain.schedule import Decisions, QueueEntry, SchedulerConfig, WaitReason, schedule
from tests.unit.scheduler.builders import NOW, entry, node, workload


def run(
    gpus: list[GpuView],
    queue: list[QueueEntry],
    allocations: tuple[Allocation, ...] = (),
    *,
    config: SchedulerConfig | None = None,
    quotas: Mapping[str, QuotaLimits] | None = None,
) -> Decisions:
    state = ClusterState(gpus=tuple(gpus), allocations=allocations)
    return schedule(queue, state, now=NOW, config=config, quotas=quotas)


def placed(decisions: Decisions) -> dict[str, tuple[Grant, ...]]:
    return {p.workload_id: p.grants for p in decisions.placements}


def test_single_gpu_goes_to_the_fullest_node_that_fits() -> None:
    held = (Allocation("old", "x", tuple(Grant(f"b-gpu{i}", "b", "", 8.0) for i in range(7)), 0.5),)
    decisions = run(node("a") + node("b"), [entry("w")], held)
    assert placed(decisions)["w"][0].node == "b"


def test_gang_lands_on_one_node_with_best_fit() -> None:
    held = (Allocation("old", "x", tuple(Grant(f"b-gpu{i}", "b", "", 8.0) for i in range(4)), 0.5),)
    decisions = run(node("a") + node("b"), [entry("w", GpuRequest(model="A100", count=4))], held)
    grants = placed(decisions)["w"]
    assert {g.node for g in grants} == {"b"}
    assert len({g.gpu for g in grants}) == 4


def test_same_node_gang_waits_when_no_node_has_room() -> None:
    decisions = run(node("a", count=2) + node("b", count=2), [entry("w", GpuRequest(model="A100", count=4))])
    assert decisions.placements == ()
    assert decisions.waiting[0].reason is WaitReason.CAPACITY


def test_all_or_nothing_gang_spans_nodes_when_asked() -> None:
    request = GpuRequest(model="A100", count=4)
    decisions = run(
        node("a", count=2) + node("b", count=2), [entry("w", request, gang=GangPolicy.ALL_OR_NOTHING)]
    )
    assert {g.node for g in placed(decisions)["w"]} == {"a", "b"}


def test_all_or_nothing_gang_takes_nothing_when_it_cannot_get_everything() -> None:
    request = GpuRequest(model="A100", count=5)
    queue = [
        entry("big", request, gang=GangPolicy.ALL_OR_NOTHING, priority=0.9),
        entry("small", priority=0.1),
    ]
    decisions = run(node("a", count=2) + node("b", count=2), queue, config=SchedulerConfig(backfill=True))
    assert "big" not in placed(decisions)
    assert "small" in placed(decisions)


def test_mig_request_gets_a_free_partition_of_that_profile() -> None:
    gpus = node("m", count=1, mig=(("3g.40gb", 4.0), ("1g.10gb", 1.0), ("1g.10gb", 1.0)))
    held = (Allocation("old", "x", (Grant("m-gpu0", "m", "mig-1", 1.0, SlotKind.MIG),), 0.5),)
    queue = [entry("a", MigRequest(profile="1g.10gb")), entry("b", MigRequest(profile="1g.10gb"))]
    decisions = run(gpus, queue, held)
    assert [g.slot for g in placed(decisions)["a"]] == ["mig-2"]
    assert "b" not in placed(decisions)


def test_unhealthy_gpus_are_never_used() -> None:
    decisions = run(node("sick", healthy=False) + node("ok", count=1), [entry("a"), entry("b")])
    assert placed(decisions)["a"][0].node == "ok"
    assert "b" not in placed(decisions)


def test_label_constraints_choose_the_matching_zone() -> None:
    gpus = node("a", labels={"zone": "a"}) + node("b", labels={"zone": "b"})
    decisions = run(gpus, [entry("w", constraints={"zone": "b"})])
    assert placed(decisions)["w"][0].node == "b"


def test_unknown_model_waits_as_no_matching_gpu() -> None:
    decisions = run(node("a"), [entry("w", GpuRequest(model="B200", count=1))])
    assert decisions.waiting[0].reason is WaitReason.NO_MATCHING_GPU


def test_memory_floor_skips_smaller_cards_of_the_same_model() -> None:
    gpus = node("small", memory_gb=40, count=1) + node("big", memory_gb=80, count=1)
    decisions = run(gpus, [entry("w", GpuRequest(model="A100", count=1, min_memory_gb=60))])
    assert placed(decisions)["w"][0].node == "big"


def test_compute_units_pick_the_best_fitting_model() -> None:
    gpus = node("a100", units=8.0) + node("l4", model="L4", units=2.0, memory_gb=24)
    decisions = run(gpus, [entry("small", UnitsRequest(units=2)), entry("large", UnitsRequest(units=16))])
    assert {g.node for g in placed(decisions)["small"]} == {"l4"}
    assert [g.node for g in placed(decisions)["large"]] == ["a100", "a100"]


def test_compute_units_can_be_served_by_a_time_slice_share() -> None:
    gpus = node("t4", model="T4", units=4.0, memory_gb=16, count=1, ratio=4) + node("a100", count=1)
    decisions = run(gpus, [entry("w", UnitsRequest(units=1))])
    grant = placed(decisions)["w"][0]
    assert (grant.node, grant.kind, grant.units) == ("t4", SlotKind.SHARE, 1.0)


def test_time_slice_shares_run_out_after_ratio_workloads() -> None:
    gpus = node("t4", model="T4", units=4.0, memory_gb=16, count=1, ratio=4)
    decisions = run(gpus, [entry(f"w{i}", UnitsRequest(units=1)) for i in range(5)])
    assert len(decisions.placements) == 4
    assert len({g.slot for p in decisions.placements for g in p.grants}) == 4


def test_no_slot_is_ever_given_twice_or_while_held() -> None:
    gpus = node("a", count=4) + node("m", count=2, mig=(("1g.10gb", 1.0),) * 7) + node("t", ratio=4, count=2)
    held = (Allocation("old", "x", (Grant("a-gpu0", "a", "", 8.0),), 0.5),)
    shapes: list[ResourceRequest] = [
        GpuRequest(model="A100", count=2),
        MigRequest(profile="1g.10gb"),
        UnitsRequest(units=2),
    ]
    queue = [entry(f"w{i}", shapes[i % 3], priority=(i % 7) / 7) for i in range(60)]
    decisions = run(gpus, queue, held)
    keys = Counter(g.key for p in decisions.placements for g in p.grants)
    assert len(keys) > 10
    assert max(keys.values()) == 1
    assert ("a-gpu0", "") not in keys


def test_cluster_state_with_a_slot_held_twice_is_refused() -> None:
    twice = tuple(Allocation(w, "x", (Grant("a-gpu0", "a", "", 8.0),), 0.5) for w in ("x1", "x2"))
    with pytest.raises(StateConflict, match="held twice"):
        run(node("a"), [entry("w")], twice)


def test_higher_priority_is_placed_first_when_capacity_is_short() -> None:
    no_cap = SchedulerConfig(reserved=ReservedPoolConfig(high_cap=1.0))
    queue = [entry("low", priority=0.2), entry("high", priority=0.8)]
    decisions = run(node("a", count=1), queue, config=no_cap)
    assert list(placed(decisions)) == ["high"]
    assert decisions.waiting[0].workload_id == "low"


def test_on_a_one_gpu_pool_the_reserve_lets_waiting_low_work_go_first() -> None:
    decisions = run(node("a", count=1), [entry("low", priority=0.2), entry("high", priority=0.8)])
    assert list(placed(decisions)) == ["low"]
    assert decisions.waiting[0].reason is WaitReason.RESERVED_POOL


def test_quota_blocks_a_tenant_over_its_limit_but_not_others() -> None:
    queue = [entry("a1", tenant="a"), entry("a2", tenant="a", age_s=-1), entry("b1", tenant="b")]
    decisions = run(node("n"), queue, quotas={"a": QuotaLimits(workloads=1)})
    assert set(placed(decisions)) == {"a1", "b1"}
    assert {w.workload_id: w.reason for w in decisions.waiting} == {"a2": WaitReason.QUOTA}


def test_reserved_pool_keeps_twenty_percent_for_low_priority_work() -> None:
    high = [entry(f"h{i}", priority=0.9, age_s=100 - i) for i in range(10)]
    low = [entry(f"l{i}", priority=0.1, age_s=50 - i) for i in range(10)]
    decisions = run(node("a", count=5) + node("b", count=5), high + low)
    got = placed(decisions)
    assert sum(w.startswith("h") for w in got) == 8
    assert sum(w.startswith("l") for w in got) == 2
    assert WaitReason.RESERVED_POOL in {w.reason for w in decisions.waiting}


def test_without_low_priority_demand_high_priority_work_takes_the_whole_pool() -> None:
    high = [entry(f"h{i}", priority=0.9) for i in range(12)]
    decisions = run(node("a", count=5) + node("b", count=5), high)
    assert len(decisions.placements) == 10


def test_a_kept_base_index_decides_exactly_as_a_fresh_one_pass_after_pass() -> None:
    gpus = tuple(
        node("a")
        + node("b", count=4, labels={"zone": "z1"})
        + node("m", count=2, mig=(("3g.40gb", 4.0), ("1g.10gb", 1.0), ("1g.10gb", 1.0)))
        + node("t", count=2, ratio=4)
    )
    base = FreeIndex.from_cluster(ClusterState(gpus=gpus, allocations=()))
    queue = [
        entry("g4", GpuRequest(model="A100", count=4)),
        entry("z", GpuRequest(model="A100", count=2), constraints={"zone": "z1"}),
        entry("mig", MigRequest(profile="1g.10gb")),
        entry("u", UnitsRequest(units=2)),
        entry("big", GpuRequest(model="A100", count=8), priority=0.9),
        entry("span", GpuRequest(model="A100", count=10), gang=GangPolicy.ALL_OR_NOTHING),
    ]
    held: tuple[Allocation, ...] = ()
    for _ in range(3):  # each pass holds what the last placed, the base stays untouched
        state = ClusterState(gpus=gpus, allocations=held)
        fresh = schedule(queue, state, now=NOW)
        kept = schedule(queue, state, now=NOW, base_index=base)
        assert kept == fresh
        assert fresh.placements or held, "the first pass places something"
        held += tuple(Allocation(p.workload_id, p.tenant, p.grants, p.priority) for p in fresh.placements)
        queue = [e for e in queue if e.workload.id not in placed(fresh)] + [
            entry(f"{e.workload.id}+", e.workload.resources) for e in queue[:2]
        ]
    empty = ClusterState(gpus=gpus, allocations=())
    assert schedule(queue, empty, now=NOW, base_index=base) == schedule(queue, empty, now=NOW), (
        "the base index is never changed by the passes that copied it"
    )


def test_training_is_never_placed_on_a_share_sliced_finer_than_one_to_four() -> None:
    inference_shares = node("fine", count=1, units=8.0, ratio=8)  # shares of 1 unit
    training_shares = node("coarse", count=1, units=8.0, ratio=4)  # shares of 2 units
    state = ClusterState(gpus=tuple(inference_shares + training_shares), allocations=())
    job = entry("train", UnitsRequest(units=1.0))
    notebook = QueueEntry(
        workload=workload("nb", UnitsRequest(units=1.0)).model_copy(update={"kind": WorkloadKind.INSTANCE}),
        priority=0.5,
    )

    decisions = schedule([job, notebook], state, now=NOW)

    placed = {p.workload_id: p.grants[0].gpu for p in decisions.placements}
    assert placed == {"train": "coarse-gpu0", "nb": "fine-gpu0"}


def test_training_waits_for_no_matching_gpu_when_only_fine_shares_exist() -> None:
    state = ClusterState(gpus=tuple(node("fine", count=2, units=8.0, ratio=8)), allocations=())

    decisions = schedule([entry("train", UnitsRequest(units=1.0))], state, now=NOW)

    assert decisions.placements == ()
    assert [(w.workload_id, w.reason) for w in decisions.waiting] == [("train", WaitReason.NO_MATCHING_GPU)]
