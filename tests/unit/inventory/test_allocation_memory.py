"""An allocation's memory: a time-sliced share holds the GPU's memory / ratio, not isolated."""

from __future__ import annotations

import pytest

from services.inventory.domain.capacity import Ledger, allocation_memory, apply_allocation, capacity_summary
from services.inventory.domain.catalog import Catalog
from services.inventory.domain.mig import MigRequest
from services.inventory.domain.partitioning import reconfigure_mig, set_time_slice
from services.inventory.domain.records import Gpu, NodeInventory
from services.inventory.domain.timeslice import WorkloadKind
from tests.unit.inventory.factories import allocation, fleet_yaml, inventories, node_yaml


@pytest.fixture
def a100(catalog: Catalog) -> NodeInventory:
    text = fleet_yaml(node_yaml(hostname="a", gpus="      - {model: A100-80GB, count: 1}\n"))
    return inventories(catalog=catalog, text=text)[0]


def _sliced(inventory: NodeInventory, ratio: int) -> tuple[NodeInventory, Gpu]:
    gpu = set_time_slice(
        gpu=inventory.gpus[0], ratio=ratio, workload_kind=WorkloadKind.INFERENCE, allocations=()
    )
    return inventory.model_copy(update={"gpus": (gpu,)}), gpu


def test_a_share_named_by_the_schedulers_slot_id_holds_an_eighth_of_a_1_to_8_gpu(a100: NodeInventory) -> None:
    _, gpu = _sliced(a100, 8)
    assert allocation_memory(gpu, "share:3") == (gpu.memory_mib // 8, False)
    assert allocation_memory(gpu, gpu.partitions[3].id) == (gpu.memory_mib // 8, False)


def test_a_whole_gpu_and_a_mig_instance_hold_the_card_and_the_instance_isolated(
    a100: NodeInventory, catalog: Catalog
) -> None:
    whole = a100.gpus[0]
    mig = reconfigure_mig(
        gpu=whole, requests=[MigRequest(profile="3g.40gb")], catalog=catalog, allocations=()
    )
    assert allocation_memory(whole, None) == (whole.memory_mib, True)
    assert allocation_memory(mig, mig.partitions[0].id) == (40 * 1024, True)


def test_capacity_counts_a_shares_part_of_the_memory_not_the_whole_card(a100: NodeInventory) -> None:
    node, gpu = _sliced(a100, 8)
    ledger = Ledger()
    for i in range(2):
        item = allocation(
            id=f"s{i}", gpu_uuid=gpu.uuid, partition_id=f"share:{i}", units=gpu.partitions[i].units
        )
        ledger = apply_allocation(ledger=ledger, allocation=item).ledger
    figures = capacity_summary(inventories=[node], ledger=ledger).by_gpu[gpu.uuid]
    assert figures.allocated_memory_mib == 2 * (gpu.memory_mib // 8)
    assert figures.free_memory_mib == gpu.memory_mib - 2 * (gpu.memory_mib // 8)
