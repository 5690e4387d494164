"""Registry operations on the node aggregate: idempotent discovery and health/status changes."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from services.inventory.domain.catalog import Catalog
from services.inventory.domain.errors import UnknownGpuError
from services.inventory.domain.health import (
    GpuHealth,
    HealthAction,
    HealthRecord,
    StatusRecord,
    transition_gpu,
    transition_node,
)
from services.inventory.domain.mig import place_layout
from services.inventory.domain.partitioning import mig_partitions, name_mig_devices
from services.inventory.domain.records import DiscoveredGpu, Gpu, Node, NodeDiscovery, NodeInventory
from services.inventory.domain.units import DEFAULT_BASIS, UnitBasis, gpu_units

__all__ = [
    "Change",
    "ChangeKind",
    "DiscoveryResult",
    "apply_discovery",
    "change_gpu_health",
    "change_node_status",
]

MISSING_REASON = "GPU missing from node discovery"
# Facts discovery owns; health and time-slicing are owned by the inventory and survive re-discovery.
_FACT_FIELDS = (
    "index",
    "model",
    "memory_mib",
    "node",
    "pci_bus_id",
    "nvlink_peers",
    "mig_enabled",
    "partitions",
)


class ChangeKind(StrEnum):
    NODE_ADDED = "node_added"
    NODE_UPDATED = "node_updated"
    GPU_ADDED = "gpu_added"
    GPU_UPDATED = "gpu_updated"
    GPU_MISSING = "gpu_missing"


class Change(BaseModel):
    """One thing a discovery changed: the later phase turns each into an inventory event."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: ChangeKind
    subject: str
    fields: tuple[str, ...] = ()


class DiscoveryResult(BaseModel):
    """The node aggregate after a discovery, what changed, and GPU health records it caused."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    inventory: NodeInventory
    changes: tuple[Change, ...] = ()
    health_records: tuple[tuple[str, HealthRecord], ...] = ()


def _gpu_from_discovery(
    found: DiscoveredGpu, hostname: str, previous: Gpu | None, catalog: Catalog, basis: UnitBasis
) -> Gpu:
    spec = catalog.get(found.model)
    # Time-slicing is the inventory's own setting: it survives re-discovery unless MIG took over.
    time_slice = previous.time_slice if previous is not None and not found.mig_enabled else None
    partitions = previous.partitions if previous is not None and time_slice is not None else ()
    if found.mig_enabled and found.mig_instances:
        placements = place_layout(model=spec, requests=found.mig_instances)
        partitions = name_mig_devices(
            mig_partitions(
                gpu_uuid=found.uuid, model=spec.name, placements=placements, catalog=catalog, basis=basis
            ),
            instances=found.mig_instances,
            device_uuids=found.mig_device_uuids,
        )
    return Gpu(
        uuid=found.uuid,
        index=found.index,
        model=spec.name,
        memory_mib=found.memory_mib or spec.memory_mib,
        node=hostname,
        pci_bus_id=found.pci_bus_id,
        nvlink_peers=tuple(sorted(found.nvlink_peers)),
        mig_enabled=found.mig_enabled,
        health=previous.health if previous is not None else GpuHealth.HEALTHY,
        units=gpu_units(model=spec.name, catalog=catalog, basis=basis),
        time_slice=time_slice,
        partitions=partitions,
    )


def _gpu_change(new: Gpu, previous: Gpu | None) -> Change | None:
    if previous is None:
        return Change(kind=ChangeKind.GPU_ADDED, subject=new.uuid)
    changed = tuple(f for f in _FACT_FIELDS if getattr(new, f) != getattr(previous, f))
    return Change(kind=ChangeKind.GPU_UPDATED, subject=new.uuid, fields=changed) if changed else None


def _node_change(discovery: NodeDiscovery, current: NodeInventory | None) -> tuple[Node, Change | None]:
    if current is None:
        node = Node(hostname=discovery.hostname, labels=discovery.labels)
        return node, Change(kind=ChangeKind.NODE_ADDED, subject=node.hostname)
    if current.node.labels == discovery.labels:
        return current.node, None
    node = current.node.model_copy(update={"labels": discovery.labels})
    return node, Change(kind=ChangeKind.NODE_UPDATED, subject=node.hostname, fields=("labels",))


def _missing(gpu: Gpu, at: datetime) -> tuple[Gpu, Change, HealthRecord | None]:
    # A GPU that vanished from NVML has usually fallen off the bus (XID 79): treat it as failed.
    health, record = transition_gpu(
        current=gpu.health, action=HealthAction.FAIL, reason=MISSING_REASON, at=at
    )
    return (
        gpu.model_copy(update={"health": health}),
        Change(kind=ChangeKind.GPU_MISSING, subject=gpu.uuid),
        record,
    )


def apply_discovery(
    *,
    current: NodeInventory | None,
    discovery: NodeDiscovery,
    catalog: Catalog,
    at: datetime,
    basis: UnitBasis = DEFAULT_BASIS,
) -> DiscoveryResult:
    """Merge a full discovery report into the node aggregate; identical facts change nothing."""
    node, node_change = _node_change(discovery, current)
    changes = [node_change] if node_change else []
    previous = {g.uuid: g for g in current.gpus} if current else {}
    gpus: list[Gpu] = []
    for found in sorted(discovery.gpus, key=lambda g: g.index):
        gpu = _gpu_from_discovery(found, discovery.hostname, previous.get(found.uuid), catalog, basis)
        change = _gpu_change(gpu, previous.get(found.uuid))
        gpus.append(gpu if change else previous[found.uuid])
        changes.extend([change] if change else [])
    records: list[tuple[str, HealthRecord]] = []
    seen = {g.uuid for g in discovery.gpus}
    for old in (g for g in previous.values() if g.uuid not in seen):
        gone, change, record = _missing(old, at)
        gpus.append(gone)
        # Re-reporting an already-failed missing GPU is a no-op, like any repeated discovery.
        changes.extend([change] if record else [])
        records.extend([(old.uuid, record)] if record else [])
    inventory = NodeInventory(node=node, gpus=tuple(gpus))
    return DiscoveryResult(inventory=inventory, changes=tuple(changes), health_records=tuple(records))


def change_gpu_health(
    *, inventory: NodeInventory, gpu_uuid: str, action: HealthAction, reason: str, at: datetime
) -> tuple[NodeInventory, HealthRecord | None]:
    """Apply a health action to one GPU of the node; the record is None when nothing changed."""
    gpu = inventory.gpu(gpu_uuid)
    if gpu is None:
        raise UnknownGpuError(f"GPU {gpu_uuid} is not on node {inventory.node.hostname}")
    health, record = transition_gpu(current=gpu.health, action=action, reason=reason, at=at)
    updated = tuple(
        g.model_copy(update={"health": health}) if g.uuid == gpu_uuid else g for g in inventory.gpus
    )
    return inventory.model_copy(update={"gpus": updated}), record


def change_node_status(
    *, inventory: NodeInventory, action: HealthAction, reason: str, at: datetime
) -> tuple[NodeInventory, StatusRecord | None]:
    """Apply a status action to the node itself (its GPUs keep their own health)."""
    status, record = transition_node(current=inventory.node.status, action=action, reason=reason, at=at)
    node = inventory.node.model_copy(update={"status": status})
    return inventory.model_copy(update={"node": node}), record
