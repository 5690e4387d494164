"""Mapping between the wire events and the inventory core."""

from __future__ import annotations

from decimal import Decimal

from libs.common.events.agent import DiscoveredGpu, DiscoveredMigInstance, NodeDiscoveredV1
from libs.common.events.inventory import GpuRegisteredV1, NodeRegisteredV1
from services.inventory.domain.catalog import Catalog
from services.inventory.domain.health import GpuHealth, HealthAction
from services.inventory.domain.partitioning import time_slice_partitions
from services.inventory.domain.registry import apply_discovery
from services.inventory.service.translate import (
    MIB,
    allocation_id,
    discovery_events,
    discovery_from_agent,
    drain_action,
    gpu_registered,
    labels_from_dict,
    partitions_changed,
    return_action,
)
from tests.unit.inventory.factories import AT, one_node


def agent_event(*, model: str = "A100-SXM4-80GB", mig: bool = False) -> NodeDiscoveredV1:
    instances = [DiscoveredMigInstance(profile="7g.80gb", slot=0)] if mig else []
    gpus = [
        DiscoveredGpu(uuid="GPU-1", index=0, model=model, memory_bytes=80 * 1024 * MIB, mig_enabled=mig,
                      mig_instances=instances),
        DiscoveredGpu(uuid="GPU-2", index=1, model="Voodoo2", memory_bytes=12 * MIB),
    ]  # fmt: skip
    return NodeDiscoveredV1(node="h1", labels={"zone": "z1", "edge": "True"}, gpus=gpus, source="nvml")


def test_agent_labels_default_region_and_pool_and_parse_edge() -> None:
    labels = labels_from_dict({"zone": "z1", "edge": "True"})
    assert (labels.zone, labels.region, labels.pool, labels.edge) == ("z1", "default", "default", True)


def test_agent_discovery_skips_gpus_of_unknown_models_and_keeps_mig_slots(catalog: Catalog) -> None:
    discovery, skipped = discovery_from_agent(event=agent_event(mig=True), catalog=catalog)
    assert skipped == ("GPU-2",)
    assert [g.uuid for g in discovery.gpus] == ["GPU-1"]
    assert discovery.gpus[0].memory_mib == 80 * 1024
    assert discovery.gpus[0].mig_instances[0].start == 0


def test_first_discovery_emits_node_and_gpu_registrations_and_identical_rediscovery_emits_nothing(
    catalog: Catalog,
) -> None:
    discovery, _ = discovery_from_agent(event=agent_event(), catalog=catalog)
    first = apply_discovery(current=None, discovery=discovery, catalog=catalog, at=AT)
    events = discovery_events(result=first)
    assert [type(e) for e in events] == [NodeRegisteredV1, GpuRegisteredV1]
    again = apply_discovery(current=first.inventory, discovery=discovery, catalog=catalog, at=AT)
    assert discovery_events(result=again) == []


def test_registered_gpu_carries_whole_gpu_units_and_time_sliced_shares(catalog: Catalog) -> None:
    inventory = one_node(catalog=catalog)
    gpu = inventory.gpus[0]
    shared = gpu.model_copy(update={"partitions": time_slice_partitions(gpu=gpu, ratio=4)})
    event = gpu_registered(gpu=shared, node=inventory.node)
    assert event.units == Decimal("8.00")
    assert {p.kind for p in event.partitions} == {"share"}
    assert sum(p.units for p in event.partitions) == Decimal("8.00")
    assert event.memory_bytes == gpu.memory_mib * MIB


def test_allocation_ids_distinguish_partitions_of_one_placement() -> None:
    whole = allocation_id(placement_id="p", gpu_uuid="g", partition_id=None)
    part = allocation_id(placement_id="p", gpu_uuid="g", partition_id="g/mig/1g.10gb@0")
    assert whole != part


def test_recovery_targets_map_to_health_actions() -> None:
    assert drain_action("failed") is HealthAction.FAIL
    assert drain_action("draining") is HealthAction.DRAIN
    assert return_action(GpuHealth.DRAINING) is HealthAction.UNDRAIN
    assert return_action(GpuHealth.FAILED) is HealthAction.RECOVER
    assert return_action(GpuHealth.HEALTHY) is None


def _mig_event(uuids: tuple[str | None, str | None]) -> NodeDiscoveredV1:
    instances = [
        DiscoveredMigInstance(profile="3g.40gb", slot=0, uuid=uuids[0]),
        DiscoveredMigInstance(profile="3g.40gb", slot=4, uuid=uuids[1]),
    ]
    gpu = DiscoveredGpu(uuid="GPU-1", index=0, model="A100-SXM4-80GB", memory_bytes=80 * 1024 * MIB,
                        mig_enabled=True, mig_instances=instances)  # fmt: skip
    return NodeDiscoveredV1(node="h1", gpus=[gpu], source="nvml")


def test_discovered_mig_device_uuids_reach_the_registered_and_partitions_changed_events(
    catalog: Catalog,
) -> None:
    discovery, _ = discovery_from_agent(event=_mig_event(("MIG-a", "MIG-b")), catalog=catalog)
    first = apply_discovery(current=None, discovery=discovery, catalog=catalog, at=AT)

    (registered,) = [e for e in discovery_events(result=first) if isinstance(e, GpuRegisteredV1)]
    expected = [("GPU-1/mig/3g.40gb@0", "MIG-a"), ("GPU-1/mig/3g.40gb@4", "MIG-b")]
    assert [(p.partition_id, p.device_uuid) for p in registered.partitions] == expected
    changed = partitions_changed(gpu=first.inventory.gpus[0])
    assert [(p.partition_id, p.device_uuid) for p in changed.partitions] == expected


def test_recreated_mig_instances_keep_their_partition_ids_and_register_their_new_uuids(
    catalog: Catalog,
) -> None:
    discovery, _ = discovery_from_agent(event=_mig_event(("MIG-a", "MIG-b")), catalog=catalog)
    first = apply_discovery(current=None, discovery=discovery, catalog=catalog, at=AT)
    again, _ = discovery_from_agent(event=_mig_event(("MIG-c", None)), catalog=catalog)

    second = apply_discovery(current=first.inventory, discovery=again, catalog=catalog, at=AT)

    (registered,) = discovery_events(result=second)
    assert isinstance(registered, GpuRegisteredV1)
    assert [(p.partition_id, p.device_uuid) for p in registered.partitions] == [
        ("GPU-1/mig/3g.40gb@0", "MIG-c"),
        ("GPU-1/mig/3g.40gb@4", None),
    ]
