"""The reallocation rule on plain values: which grants move, who swaps, and what is refused."""

from __future__ import annotations

from services.scheduler.domain.cluster import GpuView, Grant, MigPartition, SlotKind
from services.scheduler.domain.reallocation import Reallocation, Regrant, follow_devices

GPUS = {
    u: GpuView(uuid=u, node="n1", model="A100-80GB", memory_gb=80, units=8.0)
    for u in ("g1", "g2", "g3", "g4")
}
GPUS["t1"] = GpuView(uuid="t1", node="n1", model="A100-80GB", memory_gb=80, units=8.0, timeslice_ratio=2)
GPUS["m1"] = GpuView(
    uuid="m1",
    node="n1",
    model="A100-80GB",
    memory_gb=80,
    units=8.0,
    partitions=(MigPartition("m1/a", "1g.10gb", 1.0),),
)


def _whole(gpu: str) -> Grant:
    return Grant(gpu, "n1", "", 8.0)


def _follow(
    grants: list[Grant], reported: list[str], others: dict[str, list[Grant]] | None = None
) -> Reallocation:
    return follow_devices(
        placement_id="p1", node="n1", grants=grants, reported=reported, gpus=GPUS, others=others or {}
    )


def test_two_moved_grants_swap_with_the_two_placements_that_held_their_new_gpus() -> None:
    decided = _follow(
        [_whole("g1"), _whole("g2")], ["g3", "g4"], {"p3": [_whole("g3")], "p4": [_whole("g4")]}
    )

    assert decided == Reallocation(
        changes=(
            Regrant("p1", (_whole("g1"), _whole("g2")), (_whole("g3"), _whole("g4"))),
            Regrant("p3", (_whole("g3"),), (_whole("g1"),)),
            Regrant("p4", (_whole("g4"),), (_whole("g2"),)),
        )
    )


def test_reported_devices_in_another_order_change_nothing() -> None:
    assert _follow([_whole("g1"), _whole("g2")], ["g2", "g1"]) == Reallocation()


def test_a_time_sliced_share_and_a_gpu_in_mig_mode_named_by_its_uuid_are_refused() -> None:
    share = Grant("t1", "n1", "share:0", 4.0, SlotKind.SHARE)

    assert (
        _follow([share], ["g1"]).refused == "a time-sliced share of t1 does not move (the host reported g1)"
    )
    assert _follow([_whole("g1")], ["m1"]).refused == (
        "device m1 is a GPU in MIG mode: which of its instances the host gave is not known"
    )
    assert _follow([_whole("g1")], ["t1"]).refused == (
        "device t1 is a time-sliced GPU, the allocation holds a whole GPU"
    )


def test_a_mig_device_uuid_names_the_partition_that_carries_it() -> None:
    parts = (
        MigPartition("m2/a", "1g.10gb", 1.0, device_uuid="MIG-a"),
        MigPartition("m2/b", "1g.10gb", 1.0, device_uuid="MIG-b"),
        MigPartition("m2/c", "1g.10gb", 1.0),
    )
    gpus = {"m2": GpuView(uuid="m2", node="n1", model="A100-80GB", memory_gb=80, units=8.0, partitions=parts)}
    held = Grant("m2", "n1", "m2/a", 1.0, SlotKind.MIG)

    def follow(reported: str) -> Reallocation:
        return follow_devices(
            placement_id="p1", node="n1", grants=[held], reported=[reported], gpus=gpus, others={}
        )

    moved = Grant("m2", "n1", "m2/b", 1.0, SlotKind.MIG)
    assert follow("MIG-b") == Reallocation(changes=(Regrant("p1", (held,), (moved,)),))
    assert follow("MIG-a") == Reallocation()
    assert follow("MIG-c").refused == "MIG device MIG-c is not recorded as an instance of node n1"
