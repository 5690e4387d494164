"""Postgres persistence of the node aggregate, health history and the allocation ledger; never commits."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

import asyncpg

from services.inventory.domain.health import GpuHealth, HealthRecord, NodeStatus
from services.inventory.domain.records import (
    Allocation,
    Gpu,
    Node,
    NodeInventory,
    NodeLabels,
    Partition,
    PartitionKind,
    TimeSliceConfig,
)
from services.inventory.domain.timeslice import WorkloadKind

__all__ = ["AllocationRow", "Store"]

LOCK_NODES = "SELECT hostname FROM nodes WHERE hostname = ANY($1::text[]) ORDER BY hostname FOR UPDATE"
SELECT_NODES = "SELECT * FROM nodes WHERE hostname = ANY($1::text[])"
SELECT_GPUS_OF_NODES = "SELECT * FROM gpus WHERE node = ANY($1::text[]) ORDER BY node, idx"
SELECT_PARTITIONS_OF_NODES = (
    "SELECT p.* FROM partitions p JOIN gpus g ON g.uuid = p.gpu_uuid WHERE g.node = ANY($1::text[]) "
    "ORDER BY p.gpu_uuid, p.start NULLS LAST, p.share NULLS LAST, p.id"
)
SELECT_NODE_OF_GPU = "SELECT node FROM gpus WHERE uuid = $1"
UPSERT_NODE = (
    "INSERT INTO nodes (hostname, zone, region, pool, edge, status, updated_at) "
    "VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (hostname) DO UPDATE SET zone = EXCLUDED.zone, "
    "region = EXCLUDED.region, pool = EXCLUDED.pool, edge = EXCLUDED.edge, status = EXCLUDED.status, "
    "updated_at = EXCLUDED.updated_at"
)
UPSERT_GPU = (
    "INSERT INTO gpus (uuid, node, idx, model, memory_mib, pci_bus_id, nvlink_peers, mig_enabled, health, "
    "units, capacity_units, ts_ratio, ts_workload_kind, ts_warnings, updated_at) "
    "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) "
    "ON CONFLICT (uuid) DO UPDATE SET node = EXCLUDED.node, idx = EXCLUDED.idx, model = EXCLUDED.model, "
    "memory_mib = EXCLUDED.memory_mib, pci_bus_id = EXCLUDED.pci_bus_id, "
    "nvlink_peers = EXCLUDED.nvlink_peers, "
    "mig_enabled = EXCLUDED.mig_enabled, health = EXCLUDED.health, units = EXCLUDED.units, "
    "capacity_units = EXCLUDED.capacity_units, ts_ratio = EXCLUDED.ts_ratio, "
    "ts_workload_kind = EXCLUDED.ts_workload_kind, ts_warnings = EXCLUDED.ts_warnings, "
    "updated_at = EXCLUDED.updated_at"
)
DELETE_PARTITIONS = "DELETE FROM partitions WHERE gpu_uuid = ANY($1::text[])"
INSERT_PARTITION = (
    "INSERT INTO partitions (id, gpu_uuid, kind, profile, start, ratio, share, units, memory_mib, "
    "device_uuid) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
)
INSERT_HEALTH = (
    "INSERT INTO health_history (gpu_uuid, action, from_state, to_state, reason, source, at) "
    "VALUES ($1, $2, $3, $4, $5, $6, $7)"
)
SELECT_LIVE_ALLOCATIONS = (
    "SELECT allocation_id, workload_id, gpu_uuid, partition_id, units FROM allocations "
    "WHERE gpu_uuid = $1 AND NOT released ORDER BY allocation_id"
)
# What services.inventory.domain.capacity.allocation_memory says: a partition's own memory, a share of a
# time-sliced GPU (named by the scheduler's slot id) the GPU's / ratio, else the whole GPU.
SELECT_MEMORY_OF = (
    "SELECT CASE WHEN p.id IS NOT NULL THEN p.memory_mib "
    "WHEN $2 <> '' AND coalesce(g.ts_ratio, 1) > 1 THEN g.memory_mib / g.ts_ratio "
    "ELSE g.memory_mib END AS memory_mib FROM gpus g "
    "LEFT JOIN partitions p ON p.gpu_uuid = g.uuid AND p.id = $2 WHERE g.uuid = $1"
)
PLACEMENT_RELEASED = "SELECT 1 FROM released_placements WHERE placement_id = $1"
INSERT_ALLOCATION = (
    "INSERT INTO allocations (allocation_id, placement_id, workload_id, tenant_id, gpu_uuid, partition_id, "
    "units, memory_mib, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) "
    "ON CONFLICT (allocation_id) DO NOTHING RETURNING 1"
)
RELEASE_PLACEMENT = (
    "UPDATE allocations SET released = true, released_at = $2 "
    "WHERE placement_id = $1 AND NOT released RETURNING gpu_uuid"
)
#: A live allocation moved onto another GPU or instance (the host gave the placement other devices), kept
#: as held since it began; nothing when it is gone or the new id is recorded already.
MOVE_ALLOCATION = (
    "UPDATE allocations SET allocation_id = $2, gpu_uuid = $3, partition_id = $4, units = $5, "
    "memory_mib = $6 WHERE allocation_id = $1 AND NOT released "
    "AND NOT EXISTS (SELECT 1 FROM allocations WHERE allocation_id = $2) RETURNING 1"
)
REMEMBER_RELEASED = (
    "INSERT INTO released_placements (placement_id, released_at) VALUES ($1, $2) ON CONFLICT DO NOTHING"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class AllocationRow:
    """One allocation item as the ledger records it."""

    allocation_id: str
    placement_id: str
    workload_id: str
    tenant_id: str
    gpu_uuid: str
    partition_id: str | None
    units: Decimal


def _partition(row: asyncpg.Record) -> Partition:
    return Partition(
        id=row["id"],
        gpu_uuid=row["gpu_uuid"],
        kind=PartitionKind(row["kind"]),
        profile=row["profile"],
        start=row["start"],
        ratio=row["ratio"],
        share=row["share"],
        units=row["units"],
        memory_mib=row["memory_mib"],
        device_uuid=row["device_uuid"],
    )


def _gpu(row: asyncpg.Record, partitions: Sequence[Partition]) -> Gpu:
    time_slice = None
    if row["ts_ratio"] is not None:
        time_slice = TimeSliceConfig(
            ratio=row["ts_ratio"],
            workload_kind=WorkloadKind(row["ts_workload_kind"]),
            warnings=tuple(row["ts_warnings"]),
        )
    return Gpu(
        uuid=row["uuid"],
        index=row["idx"],
        model=row["model"],
        memory_mib=row["memory_mib"],
        node=row["node"],
        pci_bus_id=row["pci_bus_id"],
        nvlink_peers=tuple(row["nvlink_peers"]),
        mig_enabled=row["mig_enabled"],
        health=GpuHealth(row["health"]),
        units=row["units"],
        time_slice=time_slice,
        partitions=tuple(partitions),
    )


def _node(row: asyncpg.Record) -> Node:
    labels = NodeLabels(zone=row["zone"], region=row["region"], pool=row["pool"], edge=row["edge"])
    return Node(hostname=row["hostname"], labels=labels, status=NodeStatus(row["status"]))


def _gpu_args(gpu: Gpu, at: datetime) -> tuple[Any, ...]:
    ts = gpu.time_slice
    return (
        gpu.uuid,
        gpu.node,
        gpu.index,
        gpu.model,
        gpu.memory_mib,
        gpu.pci_bus_id,
        list(gpu.nvlink_peers),
        gpu.mig_enabled,
        gpu.health.value,
        gpu.units,
        gpu.capacity_units,
        ts.ratio if ts else None,
        ts.workload_kind.value if ts else None,
        list(ts.warnings) if ts else [],
        at,
    )


def _partition_args(p: Partition) -> tuple[Any, ...]:
    return (
        p.id,
        p.gpu_uuid,
        p.kind.value,
        p.profile,
        p.start,
        p.ratio,
        p.share,
        p.units,
        p.memory_mib,
        p.device_uuid,
    )


class Store:
    """The inventory's tables, on a connection inside the caller's transaction."""

    def __init__(self, conn: asyncpg.Connection[Any]) -> None:
        self._conn = conn

    async def load_nodes(self, *, hostnames: Sequence[str]) -> dict[str, NodeInventory]:
        """The node aggregates that exist among `hostnames`, locked for update in a stable order."""
        names = list(hostnames)
        await self._conn.fetch(LOCK_NODES, names)
        nodes = {r["hostname"]: _node(r) for r in await self._conn.fetch(SELECT_NODES, names)}
        parts: dict[str, list[Partition]] = defaultdict(list)
        for row in await self._conn.fetch(SELECT_PARTITIONS_OF_NODES, names):
            parts[row["gpu_uuid"]].append(_partition(row))
        gpus: dict[str, list[Gpu]] = defaultdict(list)
        for row in await self._conn.fetch(SELECT_GPUS_OF_NODES, names):
            gpus[row["node"]].append(_gpu(row, parts[row["uuid"]]))
        return {h: NodeInventory(node=n, gpus=tuple(gpus[h])) for h, n in nodes.items()}

    async def load_node_of_gpu(self, *, gpu_uuid: str) -> NodeInventory | None:
        """The locked aggregate of the node holding the GPU, or None for an unknown GPU."""
        hostname = await self._conn.fetchval(SELECT_NODE_OF_GPU, gpu_uuid)
        if hostname is None:
            return None
        return (await self.load_nodes(hostnames=[hostname]))[hostname]

    async def save_nodes(self, *, nodes: Sequence[Node], at: datetime) -> None:
        """Insert or update nodes."""
        if nodes:
            args = [
                (n.hostname, n.labels.zone, n.labels.region, n.labels.pool, n.labels.edge, n.status.value, at)
                for n in nodes
            ]
            await self._conn.executemany(UPSERT_NODE, args)

    async def save_gpus(self, *, gpus: Sequence[Gpu], at: datetime) -> None:
        """Insert or update GPUs and replace their partitions."""
        if not gpus:
            return
        await self._conn.executemany(UPSERT_GPU, [_gpu_args(g, at) for g in gpus])
        await self._conn.execute(DELETE_PARTITIONS, [g.uuid for g in gpus])
        partitions = [_partition_args(p) for g in gpus for p in g.partitions]
        if partitions:
            await self._conn.executemany(INSERT_PARTITION, partitions)

    async def record_health(self, *, records: Sequence[tuple[str, HealthRecord]], source: str) -> None:
        """Append health changes to the history."""
        if records:
            args = [
                (uuid, r.action.value, r.from_state.value, r.to_state.value, r.reason, source, r.at)
                for uuid, r in records
            ]
            await self._conn.executemany(INSERT_HEALTH, args)

    async def live_allocations(self, *, gpu_uuid: str) -> list[Allocation]:
        """Allocations currently holding the GPU."""
        rows = await self._conn.fetch(SELECT_LIVE_ALLOCATIONS, gpu_uuid)
        return [
            Allocation(
                allocation_id=r["allocation_id"],
                workload_id=r["workload_id"],
                gpu_uuid=r["gpu_uuid"],
                partition_id=r["partition_id"],
                units=r["units"],
            )
            for r in rows
        ]

    async def placement_released(self, *, placement_id: str) -> bool:
        """Whether the placement has already ended."""
        return bool(await self._conn.fetchval(PLACEMENT_RELEASED, placement_id))

    async def add_allocation(self, *, row: AllocationRow, at: datetime) -> bool:
        """Record an allocation once; False when its id was already in the ledger."""
        memory_mib = await self._conn.fetchval(SELECT_MEMORY_OF, row.gpu_uuid, row.partition_id or "") or 0
        inserted = await self._conn.fetchval(
            INSERT_ALLOCATION,
            row.allocation_id,
            row.placement_id,
            row.workload_id,
            row.tenant_id,
            row.gpu_uuid,
            row.partition_id,
            row.units,
            memory_mib,
            at,
        )
        return bool(inserted)

    async def move_allocation(self, *, old_id: str, row: AllocationRow) -> bool:
        """Move a live allocation onto the row's GPU or instance, keeping when it began; False when it is
        not live or the row's id is recorded already."""
        memory_mib = await self._conn.fetchval(SELECT_MEMORY_OF, row.gpu_uuid, row.partition_id or "") or 0
        moved = await self._conn.fetchval(
            MOVE_ALLOCATION, old_id, row.allocation_id, row.gpu_uuid, row.partition_id, row.units, memory_mib
        )
        return bool(moved)

    async def release_placement(self, *, placement_id: str, at: datetime) -> list[str]:
        """Release every allocation of the placement; returns the GPUs freed (empty on a replay)."""
        rows = await self._conn.fetch(RELEASE_PLACEMENT, placement_id, at)
        await self._conn.execute(REMEMBER_RELEASED, placement_id, at)
        return sorted({r["gpu_uuid"] for r in rows})
