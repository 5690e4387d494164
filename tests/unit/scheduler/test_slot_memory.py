"""A time-sliced share reports its part of the GPU's memory; fitting still sees the physical card."""

from __future__ import annotations

from decimal import Decimal

from services.scheduler.domain.cluster import GpuView, Grant, MigPartition, SlotKind, slot_memory, slots_of
from services.scheduler.domain.model import GpuRequest, UnitsRequest
from services.scheduler.domain.rows import gpu_view
from services.scheduler.domain.stored import StoredGpu
from services.scheduler.service.commit import allocation_item
from tests.unit.scheduler.builders import entry, node
from tests.unit.scheduler.test_placement import placed, run

GIB = 1024**3
CARD = 81559 * 1024**2  # an H100's framebuffer as NVML reports it: not a whole number of GiB


def _sliced(ratio: int = 8) -> GpuView:
    return GpuView("g", "n", "H100", 80, 8.0, timeslice_ratio=ratio, memory_bytes=CARD)


def test_a_share_slot_type_reports_the_gpus_memory_divided_by_its_ratio() -> None:
    types = {stype for stype, _grant in slots_of(_sliced())}
    assert [(t.kind, t.memory_gb, t.ratio) for t in types] == [(SlotKind.SHARE, 10.0, 8)]


def test_whole_and_mig_slot_types_report_the_card_and_the_instance() -> None:
    whole = GpuView("w", "n", "A100", 80, 8.0)
    mig = GpuView("m", "n", "A100", 80, 8.0, partitions=(MigPartition("m/1", "1g.10gb", 1.0, 10 * GIB),))
    assert [t.memory_gb for t, _ in slots_of(whole)] == [80]
    assert [t.memory_gb for t, _ in slots_of(mig)] == [10]


def test_a_share_grant_gives_its_part_of_the_card_and_is_not_isolated() -> None:
    gpu = _sliced()
    memory = slot_memory(gpu, Grant("g", "n", "share:3", 1.0, SlotKind.SHARE))
    assert (memory.bytes, memory.isolated) == (CARD // 8, False)


def test_whole_and_mig_grants_give_the_card_and_the_instance_isolated() -> None:
    whole = GpuView("w", "n", "A100", 80, 8.0, memory_bytes=CARD)
    mig = GpuView("m", "n", "A100", 80, 8.0, partitions=(MigPartition("m/1", "1g.10gb", 1.0, 10 * GIB),))
    card = slot_memory(whole, Grant("w", "n", "", 8.0))
    assert (card.bytes, card.isolated) == (CARD, True)
    got = slot_memory(mig, Grant("m", "n", "m/1", 1.0, SlotKind.MIG))
    assert (got.bytes, got.isolated) == (10 * GIB, True)


def test_the_placed_events_item_for_a_share_states_its_memory_and_that_it_is_not_isolated() -> None:
    gpu = _sliced(ratio=4)
    item = allocation_item(Grant("g", "n", "share:1", 2.0, SlotKind.SHARE), {"g": gpu})
    assert (item.partition_id, item.units, item.memory_bytes, item.memory_isolated) == (
        "share:1",
        Decimal("2.0"),
        CARD // 4,
        False,
    )
    whole = allocation_item(
        Grant("w", "n", "", 8.0), {"w": GpuView("w", "n", "H100", 80, 8.0, memory_bytes=CARD)}
    )
    assert (whole.memory_bytes, whole.memory_isolated) == (CARD, True)


def test_the_gpu_view_keeps_the_exact_memory_inventory_reported_for_the_card_and_its_mig_instances() -> None:
    stored = StoredGpu(
        gpu_uuid="g",
        node="n",
        model="A100-80GB",
        memory_bytes=CARD,
        units=Decimal(8),
        health="healthy",
        labels={},
        mig_enabled=True,
        time_slice_ratio=1,
        partitions=[
            {
                "partition_id": "g/mig/1",
                "kind": "mig",
                "profile": "1g.10gb",
                "units": "1",
                "memory_bytes": 10 * GIB,
            }
        ],
    )
    view = gpu_view(stored)
    assert (view.memory_gb, view.card_memory_bytes) == (80, CARD)
    assert view.partitions[0].memory_bytes == 10 * GIB


def test_a_memory_floor_is_still_checked_against_the_physical_card_of_a_sliced_fleet() -> None:
    # 1:4, the finest share a training job may take; its slots report 20 GB, the card has 80.
    gpus = node("sliced", memory_gb=80, count=1, ratio=4) + node("whole", memory_gb=80, count=1)
    decisions = run(
        gpus,
        [
            entry("big", GpuRequest(model="A100", count=1, min_memory_gb=80)),
            entry("small", UnitsRequest(units=1)),
        ],
    )
    assert placed(decisions)["big"][0].node == "whole"
    assert (placed(decisions)["small"][0].node, placed(decisions)["small"][0].kind) == (
        "sliced",
        SlotKind.SHARE,
    )
