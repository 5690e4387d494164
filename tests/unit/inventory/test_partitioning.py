from __future__ import annotations

from decimal import Decimal

import pytest

from services.inventory.domain.catalog import Catalog
from services.inventory.domain.errors import (
    InvalidMigLayoutError,
    ReconfigurationConflictError,
    TimeSliceRefusedError,
)
from services.inventory.domain.mig import MigRequest
from services.inventory.domain.partitioning import name_mig_devices, reconfigure_mig, set_time_slice
from services.inventory.domain.records import DiscoveredGpu, Gpu, PartitionKind
from services.inventory.domain.timeslice import WorkloadKind
from tests.unit.inventory.factories import allocation, one_node


@pytest.fixture
def gpu(catalog: Catalog) -> Gpu:
    return one_node(catalog=catalog).gpus[0]


def test_an_idle_gpu_is_repartitioned_into_the_requested_layout(catalog: Catalog, gpu: Gpu) -> None:
    layout = [MigRequest(profile="4g.40gb"), MigRequest(profile="2g.20gb"), MigRequest(profile="1g.10gb")]
    changed = reconfigure_mig(gpu=gpu, requests=layout, catalog=catalog, allocations=())
    assert changed.mig_enabled
    assert [(p.kind, p.profile, p.start) for p in changed.partitions] == [
        (PartitionKind.MIG, "4g.40gb", 0),
        (PartitionKind.MIG, "2g.20gb", 4),
        (PartitionKind.MIG, "1g.10gb", 6),
    ]
    assert changed.partitions[0].memory_mib == 40 * 1024


def test_mig_reconfiguration_is_refused_while_an_allocation_holds_the_gpu(catalog: Catalog, gpu: Gpu) -> None:
    held = [allocation(id="a1", gpu_uuid=gpu.uuid, units=Decimal(8))]
    with pytest.raises(ReconfigurationConflictError, match="a1"):
        reconfigure_mig(gpu=gpu, requests=[MigRequest(profile="7g.80gb")], catalog=catalog, allocations=held)


def test_allocations_on_other_gpus_do_not_block_reconfiguration(catalog: Catalog, gpu: Gpu) -> None:
    elsewhere = [allocation(id="a1", gpu_uuid="GPU-other", units=Decimal(8))]
    changed = reconfigure_mig(
        gpu=gpu, requests=[MigRequest(profile="7g.80gb")], catalog=catalog, allocations=elsewhere
    )
    assert len(changed.partitions) == 1


def test_an_impossible_layout_is_refused_before_anything_changes(catalog: Catalog, gpu: Gpu) -> None:
    with pytest.raises(InvalidMigLayoutError, match="exceeds its limit"):
        reconfigure_mig(
            gpu=gpu, requests=[MigRequest(profile="4g.40gb")] * 2, catalog=catalog, allocations=()
        )


def test_an_empty_layout_turns_mig_off(catalog: Catalog, gpu: Gpu) -> None:
    on = reconfigure_mig(gpu=gpu, requests=[MigRequest(profile="7g.80gb")], catalog=catalog, allocations=())
    off = reconfigure_mig(gpu=on, requests=[], catalog=catalog, allocations=())
    assert not off.mig_enabled
    assert off.partitions == ()
    assert off.capacity_units == gpu.units


def test_time_slicing_creates_equal_shares_that_fit_in_the_gpu(gpu: Gpu) -> None:
    shared = set_time_slice(gpu=gpu, ratio=4, workload_kind=WorkloadKind.TRAINING, allocations=())
    assert [p.share for p in shared.partitions] == [0, 1, 2, 3]
    assert len({p.units for p in shared.partitions}) == 1
    assert shared.capacity_units <= gpu.units
    assert shared.time_slice is not None
    assert shared.time_slice.warnings == ()


def test_time_slicing_for_inference_beyond_one_in_four_keeps_the_warning(gpu: Gpu) -> None:
    shared = set_time_slice(gpu=gpu, ratio=8, workload_kind=WorkloadKind.INFERENCE, allocations=())
    assert shared.time_slice is not None
    assert shared.time_slice.warnings
    assert len(shared.partitions) == 8


def test_ratio_one_turns_time_slicing_off(gpu: Gpu) -> None:
    shared = set_time_slice(gpu=gpu, ratio=2, workload_kind=WorkloadKind.INFERENCE, allocations=())
    whole = set_time_slice(gpu=shared, ratio=1, workload_kind=WorkloadKind.INFERENCE, allocations=())
    assert whole.time_slice is None
    assert whole.partitions == ()


def test_time_slicing_a_mig_gpu_is_refused(catalog: Catalog, gpu: Gpu) -> None:
    mig = reconfigure_mig(gpu=gpu, requests=[MigRequest(profile="7g.80gb")], catalog=catalog, allocations=())
    with pytest.raises(TimeSliceRefusedError, match="MIG mode"):
        set_time_slice(gpu=mig, ratio=2, workload_kind=WorkloadKind.INFERENCE, allocations=())


def test_time_slicing_a_busy_gpu_is_refused(gpu: Gpu) -> None:
    held = [allocation(id="a9", gpu_uuid=gpu.uuid, units=Decimal(1))]
    with pytest.raises(ReconfigurationConflictError):
        set_time_slice(gpu=gpu, ratio=2, workload_kind=WorkloadKind.INFERENCE, allocations=held)


def test_mig_device_uuids_name_partitions_by_profile_and_slot(catalog: Catalog, gpu: Gpu) -> None:
    layout = [MigRequest(profile="4g.40gb"), MigRequest(profile="1g.10gb"), MigRequest(profile="1g.10gb")]
    parts = reconfigure_mig(gpu=gpu, requests=layout, catalog=catalog, allocations=()).partitions
    found = [
        MigRequest(profile="1g.10gb", start=5),
        MigRequest(profile="4g.40gb"),
        MigRequest(profile="1g.10gb"),
    ]

    named = name_mig_devices(parts, instances=found, device_uuids=["MIG-5", "MIG-4g", "MIG-x"])

    assert [p.id for p in named] == [p.id for p in parts]
    # The slotless 1g.10gb is one of two of its profile: which partition it is cannot be told.
    assert [(p.profile, p.start, p.device_uuid) for p in named] == [
        ("4g.40gb", 0, "MIG-4g"),
        ("1g.10gb", 4, None),
        ("1g.10gb", 5, "MIG-5"),
    ]


def test_a_discovered_gpu_with_another_count_of_mig_uuids_than_instances_is_refused() -> None:
    with pytest.raises(ValueError, match="GPU g1: 1 MIG device UUIDs for 2 MIG instances"):
        DiscoveredGpu(
            uuid="g1",
            index=0,
            model="A100-80GB",
            pci_bus_id="0000:01:00.0",
            mig_enabled=True,
            mig_instances=(MigRequest(profile="1g.10gb"), MigRequest(profile="1g.10gb")),
            mig_device_uuids=("MIG-1",),
        )
