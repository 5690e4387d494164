from __future__ import annotations

from decimal import Decimal

import pytest

from services.inventory.domain.capacity import Ledger, apply_allocation, apply_release, capacity_summary
from services.inventory.domain.catalog import Catalog
from services.inventory.domain.errors import AllocationConflictError
from services.inventory.domain.health import HealthAction
from services.inventory.domain.mig import MigRequest
from services.inventory.domain.partitioning import reconfigure_mig
from services.inventory.domain.records import Allocation, NodeInventory
from services.inventory.domain.registry import change_gpu_health, change_node_status
from tests.unit.inventory.factories import AT, allocation, fleet_yaml, inventories, node_yaml


@pytest.fixture
def fleet(catalog: Catalog) -> list[NodeInventory]:
    text = fleet_yaml(
        node_yaml(hostname="a", pool="training", zone="z1", gpus="      - {model: A100-80GB, count: 2}\n"),
        node_yaml(hostname="b", pool="inference", zone="z2", gpus="      - {model: L4, count: 2}\n"),
    )
    return inventories(catalog=catalog, text=text)


def ledger_of(*allocations: Allocation) -> Ledger:
    ledger = Ledger()
    for item in allocations:
        ledger = apply_allocation(ledger=ledger, allocation=item).ledger
    return ledger


def test_an_empty_pool_is_all_free(fleet: list[NodeInventory]) -> None:
    summary = capacity_summary(inventories=fleet, ledger=Ledger())
    expected_units = sum(g.units for inv in fleet for g in inv.gpus)
    assert summary.total.total_units == summary.total.free_units == expected_units
    # Decimal equals int at runtime; mypy's strict equality does not know that.
    assert (summary.total.total_gpus, summary.total.free_gpus, summary.total.fragmented_units) == (4, 4, 0)  # type: ignore[comparison-overlap]


def test_allocations_show_up_per_pool_zone_node_model_and_gpu(fleet: list[NodeInventory]) -> None:
    a100 = fleet[0].gpus[0]
    summary = capacity_summary(
        inventories=fleet, ledger=ledger_of(allocation(id="x", gpu_uuid=a100.uuid, units=a100.units))
    )
    for view, key in [
        ("by_pool", "training"),
        ("by_zone", "z1"),
        ("by_node", "a"),
        ("by_model", "A100-80GB"),
    ]:
        figures = getattr(summary, view)[key]
        assert figures.allocated_units == a100.units
        assert figures.in_use_gpus == 1
    assert summary.by_gpu[a100.uuid].free_units == 0
    assert summary.by_pool["inference"].allocated_units == 0
    assert summary.total.allocated_memory_mib == a100.memory_mib


def test_free_units_on_a_partly_used_gpu_count_as_fragmentation(fleet: list[NodeInventory]) -> None:
    gpu = fleet[1].gpus[0]
    half = gpu.units / 2
    summary = capacity_summary(
        inventories=fleet, ledger=ledger_of(allocation(id="x", gpu_uuid=gpu.uuid, units=half))
    )
    assert summary.total.fragmented_units == gpu.units - half
    assert summary.by_gpu[fleet[1].gpus[1].uuid].fragmented_units == 0


def test_a_mig_allocation_uses_its_partition_memory(catalog: Catalog, fleet: list[NodeInventory]) -> None:
    gpu = reconfigure_mig(
        gpu=fleet[0].gpus[0], requests=[MigRequest(profile="3g.40gb")] * 2, catalog=catalog, allocations=()
    )
    node = fleet[0].model_copy(update={"gpus": (gpu,)})
    part = gpu.partitions[0]
    ledger = ledger_of(allocation(id="m", gpu_uuid=gpu.uuid, partition_id=part.id, units=part.units))
    figures = capacity_summary(inventories=[node], ledger=ledger).by_gpu[gpu.uuid]
    assert figures.allocated_memory_mib == part.memory_mib
    assert figures.free_units == gpu.capacity_units - part.units


def test_draining_and_failed_gpus_offer_no_capacity(fleet: list[NodeInventory]) -> None:
    node, _ = change_gpu_health(
        inventory=fleet[0], gpu_uuid=fleet[0].gpus[0].uuid, action=HealthAction.DRAIN, reason="r", at=AT
    )
    node, _ = change_gpu_health(
        inventory=node, gpu_uuid=node.gpus[1].uuid, action=HealthAction.FAIL, reason="r", at=AT
    )
    figures = capacity_summary(inventories=[node], ledger=Ledger()).total
    assert figures.free_units == 0
    assert figures.free_gpus == 0
    assert figures.free_memory_mib == 0
    assert figures.unavailable_gpus == 2
    assert figures.unavailable_units == figures.total_units


def test_gpus_on_a_drained_node_offer_no_capacity(fleet: list[NodeInventory]) -> None:
    node, _ = change_node_status(inventory=fleet[1], action=HealthAction.DRAIN, reason="upgrade", at=AT)
    assert capacity_summary(inventories=[node], ledger=Ledger()).total.free_units == 0


def test_the_same_allocation_applied_twice_changes_nothing() -> None:
    item = allocation(id="x", gpu_uuid="GPU-1", units=Decimal("2.50"))
    once = apply_allocation(ledger=Ledger(), allocation=item)
    twice = apply_allocation(ledger=once.ledger, allocation=item)
    assert once.changed
    assert not twice.changed
    assert twice.ledger == once.ledger


def test_a_release_is_applied_once_and_a_late_replay_does_not_resurrect(fleet: list[NodeInventory]) -> None:
    item = allocation(id="x", gpu_uuid=fleet[0].gpus[0].uuid, units=Decimal(8))
    released = apply_release(ledger=ledger_of(item), allocation_id="x")
    assert released.changed
    assert released.ledger.allocations == {}
    assert not apply_release(ledger=released.ledger, allocation_id="x").changed
    replay = apply_allocation(ledger=released.ledger, allocation=item)
    assert not replay.changed
    assert capacity_summary(inventories=fleet, ledger=replay.ledger).total.allocated_units == 0


def test_the_same_allocation_id_with_other_content_is_a_conflict() -> None:
    ledger = ledger_of(allocation(id="x", gpu_uuid="GPU-1", units=Decimal(1)))
    with pytest.raises(AllocationConflictError, match="x"):
        apply_allocation(ledger=ledger, allocation=allocation(id="x", gpu_uuid="GPU-2", units=Decimal(1)))


def test_units_add_up_exactly_across_views(fleet: list[NodeInventory]) -> None:
    items = [
        allocation(id=f"a{i}", gpu_uuid=g.uuid, units=Decimal("0.33"))
        for i, g in enumerate(g for n in fleet for g in n.gpus)
    ]
    summary = capacity_summary(inventories=fleet, ledger=ledger_of(*items))
    assert sum((f.free_units for f in summary.by_node.values()), Decimal(0)) == summary.total.free_units
    assert summary.total.allocated_units == Decimal("1.32")
