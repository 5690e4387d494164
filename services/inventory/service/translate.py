"""Between the wire and the core: agent reports into discoveries, records and changes into events.

Pure functions; the handlers and the API call them inside a unit of work.
"""

from __future__ import annotations

from collections.abc import Mapping

from libs.common.events import Event
from libs.common.events.agent import NodeDiscoveredV1
from libs.common.events.inventory import (
    GpuHealthChangedV1,
    GpuPartitionsChangedV1,
    GpuRegisteredV1,
    NodeRegisteredV1,
    PartitionInfo,
)
from services.inventory.domain.catalog import Catalog
from services.inventory.domain.errors import UnknownModelError
from services.inventory.domain.health import GpuHealth, HealthAction, HealthRecord
from services.inventory.domain.mig import MigRequest
from services.inventory.domain.records import (
    DiscoveredGpu,
    Gpu,
    Node,
    NodeDiscovery,
    NodeInventory,
    NodeLabels,
    Partition,
    PartitionKind,
)
from services.inventory.domain.registry import ChangeKind, DiscoveryResult

__all__ = [
    "MIB",
    "allocation_id",
    "discovery_events",
    "discovery_from_agent",
    "drain_action",
    "gpu_registered",
    "health_changed",
    "labels_from_dict",
    "labels_to_dict",
    "partitions_changed",
    "return_action",
]

MIB = 1024 * 1024
_DEFAULT_LABEL = "default"
_TRUE = frozenset({"true", "1", "yes", "on"})


def labels_from_dict(labels: Mapping[str, str]) -> NodeLabels:
    """Node labels from the agent's free-form map; zone, region and pool default to 'default'."""
    return NodeLabels(
        zone=labels.get("zone") or _DEFAULT_LABEL,
        region=labels.get("region") or _DEFAULT_LABEL,
        pool=labels.get("pool") or _DEFAULT_LABEL,
        edge=str(labels.get("edge", "false")).strip().lower() in _TRUE,
    )


def labels_to_dict(labels: NodeLabels) -> dict[str, str]:
    """Node labels as the string map the inventory events carry."""
    return {
        "zone": labels.zone,
        "region": labels.region,
        "pool": labels.pool,
        "edge": "true" if labels.edge else "false",
    }


def discovery_from_agent(
    *, event: NodeDiscoveredV1, catalog: Catalog
) -> tuple[NodeDiscovery, tuple[str, ...]]:
    """The agent's report as a core discovery, plus the uuids skipped because their model is unknown."""
    gpus: list[DiscoveredGpu] = []
    skipped: list[str] = []
    for found in event.gpus:
        try:
            catalog.get(found.model)
        except UnknownModelError:
            skipped.append(found.uuid)
            continue
        gpus.append(
            DiscoveredGpu(
                uuid=found.uuid,
                index=found.index,
                model=found.model,
                memory_mib=found.memory_bytes // MIB or None,
                pci_bus_id=found.pci_bus_id or "unknown",
                nvlink_peers=tuple(found.nvlink_peers),
                mig_enabled=found.mig_enabled,
                mig_instances=tuple(MigRequest(profile=m.profile, start=m.slot) for m in found.mig_instances),
                mig_device_uuids=tuple(m.uuid for m in found.mig_instances),
            )
        )
    labels = labels_from_dict(event.labels)
    return NodeDiscovery(hostname=event.node, labels=labels, gpus=tuple(gpus)), tuple(skipped)


def _partition_info(partition: Partition) -> PartitionInfo:
    return PartitionInfo(
        partition_id=partition.id,
        kind="mig" if partition.kind is PartitionKind.MIG else "share",
        profile=partition.profile,
        slot=partition.start,
        units=partition.units,
        memory_bytes=partition.memory_mib * MIB,
        device_uuid=partition.device_uuid,
    )


def gpu_registered(*, gpu: Gpu, node: Node) -> GpuRegisteredV1:
    """The full facts of a GPU as the scheduler builds its view from them."""
    return GpuRegisteredV1(
        gpu_uuid=gpu.uuid,
        node=gpu.node,
        index=gpu.index,
        model=gpu.model,
        memory_bytes=gpu.memory_mib * MIB,
        units=gpu.units,
        health=gpu.health.value,
        labels=labels_to_dict(node.labels),
        pci_bus_id=gpu.pci_bus_id,
        nvlink_peers=list(gpu.nvlink_peers),
        mig_enabled=gpu.mig_enabled,
        time_slice_ratio=gpu.time_slice.ratio if gpu.time_slice else 1,
        partitions=[_partition_info(p) for p in gpu.partitions],
    )


def partitions_changed(*, gpu: Gpu) -> GpuPartitionsChangedV1:
    """A GPU's complete new set of slices (empty: the whole GPU is one allocatable unit)."""
    return GpuPartitionsChangedV1(
        gpu_uuid=gpu.uuid,
        node=gpu.node,
        mig_enabled=gpu.mig_enabled,
        time_slice_ratio=gpu.time_slice.ratio if gpu.time_slice else 1,
        partitions=[_partition_info(p) for p in gpu.partitions],
    )


def health_changed(*, gpu_uuid: str, node: str, record: HealthRecord) -> GpuHealthChangedV1:
    """The event for one recorded health change."""
    return GpuHealthChangedV1(
        gpu_uuid=gpu_uuid,
        node=node,
        previous=record.from_state.value,
        health=record.to_state.value,
        reason=record.reason,
    )


def discovery_events(*, result: DiscoveryResult) -> list[Event]:
    """One event per change a discovery made; an identical re-discovery yields none."""
    inventory: NodeInventory = result.inventory
    records = dict(result.health_records)
    events: list[Event] = []
    for change in result.changes:
        if change.kind in (ChangeKind.NODE_ADDED, ChangeKind.NODE_UPDATED):
            node = inventory.node
            events.append(
                NodeRegisteredV1(node=node.hostname, labels=labels_to_dict(node.labels), status=node.status)
            )
        elif change.kind in (ChangeKind.GPU_ADDED, ChangeKind.GPU_UPDATED):
            gpu = inventory.gpu(change.subject)
            assert gpu is not None
            events.append(gpu_registered(gpu=gpu, node=inventory.node))
        elif change.subject in records:
            record = records[change.subject]
            events.append(
                health_changed(gpu_uuid=change.subject, node=inventory.node.hostname, record=record)
            )
    return events


def allocation_id(*, placement_id: str, gpu_uuid: str, partition_id: str | None) -> str:
    """The ledger key of one allocation item: placement, GPU and partition ('-' for the whole GPU)."""
    return f"{placement_id}|{gpu_uuid}|{partition_id or '-'}"


def drain_action(target: str) -> HealthAction:
    """Recovery's drain target as a health action."""
    return HealthAction.FAIL if target == "failed" else HealthAction.DRAIN


def return_action(current: GpuHealth) -> HealthAction | None:
    """What brings a GPU in `current` back to healthy; None when it already is."""
    if current is GpuHealth.HEALTHY:
        return None
    return HealthAction.UNDRAIN if current is GpuHealth.DRAINING else HealthAction.RECOVER
