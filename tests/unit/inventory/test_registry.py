from __future__ import annotations

import pytest

from services.inventory.domain.catalog import Catalog
from services.inventory.domain.errors import InvalidMigLayoutError, UnknownGpuError, UnknownModelError
from services.inventory.domain.health import GpuHealth, HealthAction, NodeStatus
from services.inventory.domain.mig import MigRequest
from services.inventory.domain.records import DiscoveredGpu, NodeDiscovery, NodeInventory, NodeLabels
from services.inventory.domain.registry import (
    ChangeKind,
    apply_discovery,
    change_gpu_health,
    change_node_status,
)
from tests.unit.inventory.factories import AT

LABELS = NodeLabels(zone="z1", region="r1", pool="inference")


def found(index: int, *, model: str = "NVIDIA H100 80GB HBM3", **facts: object) -> DiscoveredGpu:
    return DiscoveredGpu.model_validate(
        {
            "uuid": f"GPU-{index}",
            "index": index,
            "model": model,
            "pci_bus_id": f"0000:{index:02x}:00.0",
            **facts,
        }
    )


def report(*gpus: DiscoveredGpu, labels: NodeLabels = LABELS) -> NodeDiscovery:
    return NodeDiscovery(hostname="node-a", labels=labels, gpus=gpus)


def first(catalog: Catalog, discovery: NodeDiscovery) -> NodeInventory:
    return apply_discovery(current=None, discovery=discovery, catalog=catalog, at=AT).inventory


def test_first_discovery_adds_the_node_and_every_gpu(catalog: Catalog) -> None:
    result = apply_discovery(current=None, discovery=report(found(0), found(1)), catalog=catalog, at=AT)
    assert [c.kind for c in result.changes] == [
        ChangeKind.NODE_ADDED,
        ChangeKind.GPU_ADDED,
        ChangeKind.GPU_ADDED,
    ]
    gpu = result.inventory.gpus[0]
    assert (gpu.model, gpu.node, gpu.health) == ("H100-80GB-SXM", "node-a", GpuHealth.HEALTHY)
    assert gpu.memory_mib == catalog.get("H100-80GB-SXM").memory_mib
    assert gpu.units > 0


def test_rediscovering_identical_facts_changes_nothing(catalog: Catalog) -> None:
    discovery = report(
        found(0), found(1, mig_enabled=True, mig_instances=[{"profile": "3g.40gb", "start": 4}])
    )
    inventory = first(catalog, discovery)
    again = apply_discovery(current=inventory, discovery=discovery, catalog=catalog, at=AT)
    assert again.changes == ()
    assert again.health_records == ()
    assert again.inventory == inventory


def test_changed_facts_and_labels_are_reported_field_by_field(catalog: Catalog) -> None:
    inventory = first(catalog, report(found(0)))
    moved = report(found(0, pci_bus_id="0000:99:00.0"), labels=LABELS.model_copy(update={"zone": "z2"}))
    result = apply_discovery(current=inventory, discovery=moved, catalog=catalog, at=AT)
    assert [(c.kind, c.fields) for c in result.changes] == [
        (ChangeKind.NODE_UPDATED, ("labels",)),
        (ChangeKind.GPU_UPDATED, ("pci_bus_id",)),
    ]
    assert result.inventory.node.labels.zone == "z2"


def test_health_set_by_the_inventory_survives_rediscovery(catalog: Catalog) -> None:
    inventory = first(catalog, report(found(0)))
    drained, _ = change_gpu_health(
        inventory=inventory, gpu_uuid="GPU-0", action=HealthAction.DRAIN, reason="r", at=AT
    )
    again = apply_discovery(current=drained, discovery=report(found(0)), catalog=catalog, at=AT)
    assert again.changes == ()
    assert again.inventory.gpus[0].health is GpuHealth.DRAINING


def test_a_gpu_missing_from_discovery_is_failed_once_and_kept(catalog: Catalog) -> None:
    inventory = first(catalog, report(found(0), found(1)))
    result = apply_discovery(current=inventory, discovery=report(found(0)), catalog=catalog, at=AT)
    assert [(c.kind, c.subject) for c in result.changes] == [(ChangeKind.GPU_MISSING, "GPU-1")]
    missing = result.inventory.gpu("GPU-1")
    assert missing is not None
    assert missing.health is GpuHealth.FAILED
    assert [(uuid, r.to_state) for uuid, r in result.health_records] == [("GPU-1", GpuHealth.FAILED)]
    repeat = apply_discovery(current=result.inventory, discovery=report(found(0)), catalog=catalog, at=AT)
    assert repeat.changes == ()
    assert repeat.health_records == ()


def test_discovered_mig_instances_become_partitions_with_stable_ids(catalog: Catalog) -> None:
    instances = [{"profile": "3g.40gb"}, {"profile": "3g.40gb"}]
    gpu = first(catalog, report(found(0, mig_enabled=True, mig_instances=instances))).gpus[0]
    assert [p.id for p in gpu.partitions] == ["GPU-0/mig/3g.40gb@0", "GPU-0/mig/3g.40gb@4"]
    assert gpu.capacity_units == sum(p.units for p in gpu.partitions) < gpu.units


def test_discovering_an_unknown_model_raises(catalog: Catalog) -> None:
    with pytest.raises(UnknownModelError):
        first(catalog, report(found(0, model="Voodoo 5")))


def test_health_actions_on_a_gpu_of_another_node_are_refused(catalog: Catalog) -> None:
    inventory = first(catalog, report(found(0)))
    with pytest.raises(UnknownGpuError):
        change_gpu_health(inventory=inventory, gpu_uuid="GPU-9", action=HealthAction.FAIL, reason="r", at=AT)


def test_draining_a_node_records_the_change_and_leaves_gpu_health_alone(catalog: Catalog) -> None:
    inventory = first(catalog, report(found(0)))
    drained, record = change_node_status(
        inventory=inventory, action=HealthAction.DRAIN, reason="upgrade", at=AT
    )
    assert drained.node.status is NodeStatus.DRAINING
    assert record is not None
    assert record.reason == "upgrade"
    assert drained.gpus == inventory.gpus


def test_mig_requests_in_discovery_are_validated(catalog: Catalog) -> None:
    bad = report(found(0, mig_enabled=True, mig_instances=[MigRequest(profile="7g.80gb", start=4)]))
    with pytest.raises(InvalidMigLayoutError, match=r"7g\.80gb cannot start at slot 4"):
        first(catalog, bad)
