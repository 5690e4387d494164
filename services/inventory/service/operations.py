"""Use cases on one unit of work: load the aggregate, apply the core rule, save, emit what changed.

Shared by the event handlers, the admin API and the fleet-file loader, so every path changes
state and emits events the same way. Time is passed in (an event's time, or the request's).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from libs.common.events import Event
from services.inventory.adapters.node_store import Store
from services.inventory.domain.catalog import Catalog
from services.inventory.domain.errors import ForbiddenTransitionError, UnknownGpuError
from services.inventory.domain.health import HealthAction, HealthRecord
from services.inventory.domain.mig import MigRequest
from services.inventory.domain.partitioning import reconfigure_mig, set_time_slice
from services.inventory.domain.records import Gpu, Node, NodeDiscovery, NodeInventory
from services.inventory.domain.registry import apply_discovery, change_gpu_health
from services.inventory.domain.timeslice import WorkloadKind
from services.inventory.domain.units import UnitBasis
from services.inventory.service.translate import discovery_events, health_changed, partitions_changed
from services.inventory.service.unit_of_work import InventoryUnitOfWork

__all__ = [
    "Registration",
    "UnitContext",
    "change_health",
    "change_node_health",
    "register",
    "repartition_mig",
    "repartition_time_slice",
]


@dataclass(frozen=True, slots=True)
class UnitContext:
    """The catalog and the unit basis every operation derives units from."""

    catalog: Catalog
    basis: UnitBasis


@dataclass(frozen=True, slots=True)
class Registration:
    """What a registration changed."""

    nodes: int
    nodes_changed: int
    gpus: int
    gpus_changed: int
    events: int


async def register(
    *,
    uow: InventoryUnitOfWork,
    discoveries: Sequence[NodeDiscovery],
    units: UnitContext,
    at: datetime,
    source: str,
) -> Registration:
    """Apply full discovery reports idempotently: one event per change, none for identical facts."""
    store = uow.nodes
    current = await store.load_nodes(hostnames=[d.hostname for d in discoveries])
    nodes: list[Node] = []
    gpus: list[Gpu] = []
    records: list[tuple[str, HealthRecord]] = []
    events: list[Event] = []
    for discovery in discoveries:
        result = apply_discovery(
            current=current.get(discovery.hostname),
            discovery=discovery,
            catalog=units.catalog,
            at=at,
            basis=units.basis,
        )
        kinds = {c.subject: c.kind for c in result.changes}
        if discovery.hostname in kinds:
            nodes.append(result.inventory.node)
        gpus.extend(g for g in result.inventory.gpus if g.uuid in kinds)
        records.extend(result.health_records)
        events.extend(discovery_events(result=result))
    # A new GPU's node row must exist first; the node of an existing GPU already does.
    await store.save_nodes(nodes=nodes, at=at)
    await store.save_gpus(gpus=gpus, at=at)
    await store.record_health(records=records, source=source)
    for event in events:
        await uow.emit(event)
    return Registration(
        nodes=len(discoveries),
        nodes_changed=len(nodes),
        gpus=sum(len(d.gpus) for d in discoveries),
        gpus_changed=len(gpus),
        events=len(events),
    )


async def _load(store: Store, gpu_uuid: str) -> NodeInventory:
    inventory = await store.load_node_of_gpu(gpu_uuid=gpu_uuid)
    if inventory is None:
        raise UnknownGpuError(f"no GPU {gpu_uuid!r} is registered")
    return inventory


async def _apply_health(
    *,
    uow: InventoryUnitOfWork,
    inventory: NodeInventory,
    gpu_uuid: str,
    action: HealthAction,
    reason: str,
    at: datetime,
) -> tuple[NodeInventory, HealthRecord | None]:
    updated, record = change_gpu_health(
        inventory=inventory, gpu_uuid=gpu_uuid, action=action, reason=reason, at=at
    )
    if record is not None:
        gpu = updated.gpu(gpu_uuid)
        assert gpu is not None
        await uow.nodes.save_gpus(gpus=[gpu], at=at)
        await uow.emit(health_changed(gpu_uuid=gpu_uuid, node=updated.node.hostname, record=record))
    return updated, record


async def change_health(
    *, uow: InventoryUnitOfWork, gpu_uuid: str, action: HealthAction, reason: str, at: datetime, source: str
) -> tuple[Gpu, HealthRecord | None]:
    """Apply a health action to one GPU; a repeat of the current state records nothing."""
    store = uow.nodes
    inventory = await _load(store, gpu_uuid)
    updated, record = await _apply_health(
        uow=uow, inventory=inventory, gpu_uuid=gpu_uuid, action=action, reason=reason, at=at
    )
    await store.record_health(records=[(gpu_uuid, record)] if record else [], source=source)
    gpu = updated.gpu(gpu_uuid)
    assert gpu is not None
    return gpu, record


async def change_node_health(
    *, uow: InventoryUnitOfWork, hostname: str, action: HealthAction, reason: str, at: datetime, source: str
) -> list[tuple[str, HealthRecord]]:
    """Apply a health action to every GPU of a node; GPUs the action cannot apply to are left as they are."""
    store = uow.nodes
    inventory = (await store.load_nodes(hostnames=[hostname])).get(hostname)
    if inventory is None:
        return []
    records: list[tuple[str, HealthRecord]] = []
    for gpu in inventory.gpus:
        try:
            inventory, record = await _apply_health(
                uow=uow, inventory=inventory, gpu_uuid=gpu.uuid, action=action, reason=reason, at=at
            )
        except ForbiddenTransitionError:
            continue  # e.g. draining a node keeps its already-failed GPUs failed
        records.extend([(gpu.uuid, record)] if record else [])
    await store.record_health(records=records, source=source)
    return records


async def _save_partitions(uow: InventoryUnitOfWork, before: Gpu, after: Gpu, at: datetime) -> Gpu:
    if after != before:
        await uow.nodes.save_gpus(gpus=[after], at=at)
        if after.partitions != before.partitions or after.mig_enabled != before.mig_enabled:
            await uow.emit(partitions_changed(gpu=after))
    return after


async def repartition_mig(
    *,
    uow: InventoryUnitOfWork,
    gpu_uuid: str,
    requests: Sequence[MigRequest],
    units: UnitContext,
    at: datetime,
) -> Gpu:
    """Set an idle GPU's MIG layout (empty: MIG off); refused while allocations hold it."""
    store = uow.nodes
    gpu = (await _load(store, gpu_uuid)).gpu(gpu_uuid)
    assert gpu is not None
    updated = reconfigure_mig(
        gpu=gpu,
        requests=requests,
        catalog=units.catalog,
        allocations=await store.live_allocations(gpu_uuid=gpu_uuid),
        basis=units.basis,
    )
    return await _save_partitions(uow, gpu, updated, at)


async def repartition_time_slice(
    *, uow: InventoryUnitOfWork, gpu_uuid: str, ratio: int, workload_kind: WorkloadKind, at: datetime
) -> Gpu:
    """Share an idle GPU `ratio` ways; the returned GPU's time-slice config carries any warning."""
    store = uow.nodes
    gpu = (await _load(store, gpu_uuid)).gpu(gpu_uuid)
    assert gpu is not None
    updated = set_time_slice(
        gpu=gpu,
        ratio=ratio,
        workload_kind=workload_kind,
        allocations=await store.live_allocations(gpu_uuid=gpu_uuid),
    )
    return await _save_partitions(uow, gpu, updated, at)
