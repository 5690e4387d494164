"""Read-side queries: lists, GPU detail and the capacity summary, computed by Postgres aggregates.

The capacity summary is one GROUPING SETS query over gpus x nodes x live allocations, so every
replica answers from committed state with no cache to keep in step; the per-GPU arithmetic is
the core's `gpu_figures` written in SQL (an integration test holds the two equal).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import asyncpg

from services.inventory.adapters.read_models import (
    AllocationOut,
    CapacityFigures,
    CapacityOut,
    GpuDetail,
    GpuOut,
    HealthEntry,
    NodeOut,
    PartitionOut,
    TimeSliceOut,
)

__all__ = ["GROUPINGS", "capacity", "gpu_detail", "list_gpus", "list_nodes", "list_partitions"]

# Filter name -> SQL column; values are always bound parameters.
_FILTER_COLUMNS = {
    "gpu": "g.uuid",
    "node": "g.node",
    "model": "g.model",
    "pool": "n.pool",
    "zone": "n.zone",
    "health": "g.health",
}
# Grouping name -> column of the CTE `f` the summary groups by.
GROUPINGS = {"pool": "pool", "zone": "zone", "node": "node", "model": "model", "gpu": "uuid"}

SELECT_NODES = (
    "SELECT n.*, (SELECT count(*) FROM gpus g WHERE g.node = n.hostname) AS gpus FROM nodes n "
    "{where} ORDER BY n.hostname LIMIT {limit} OFFSET {offset}"
)
SELECT_GPUS = (
    "SELECT g.*, n.pool, n.zone, n.region FROM gpus g JOIN nodes n ON n.hostname = g.node "
    "{where} ORDER BY g.node, g.idx LIMIT {limit} OFFSET {offset}"
)
SELECT_PARTITIONS = (
    "SELECT p.* FROM partitions p JOIN gpus g ON g.uuid = p.gpu_uuid JOIN nodes n ON n.hostname = g.node "
    "{where} ORDER BY p.gpu_uuid, p.start NULLS LAST, p.share NULLS LAST LIMIT {limit} OFFSET {offset}"
)
# memory_isolated as the core's capacity.allocation_memory says: a share of a time-sliced GPU is not.
SELECT_ALLOCATIONS_OF_GPU = (
    "SELECT a.*, NOT (a.partition_id IS NOT NULL AND coalesce(g.ts_ratio, 1) > 1) AS memory_isolated "
    "FROM allocations a JOIN gpus g ON g.uuid = a.gpu_uuid "
    "WHERE a.gpu_uuid = $1 AND NOT a.released AND ($2::text IS NULL OR a.tenant_id = $2) "
    "ORDER BY a.allocation_id"
)
SELECT_HEALTH_OF_GPU = "SELECT * FROM health_history WHERE gpu_uuid = $1 ORDER BY at DESC, id DESC LIMIT 20"
# Per-GPU figures, mirroring services.inventory.domain.capacity.gpu_figures.
CAPACITY = """
WITH live AS (
    SELECT gpu_uuid, sum(units) AS units, sum(memory_mib) AS memory_mib
    FROM allocations WHERE NOT released GROUP BY gpu_uuid
), f AS (
    SELECT g.uuid, g.node, g.model, g.memory_mib, g.capacity_units, n.pool, n.zone,
        (g.health IN ('healthy', 'degraded') AND n.status = 'ready') AS avail,
        live.gpu_uuid IS NOT NULL AS used,
        coalesce(live.units, 0) AS alloc,
        greatest(g.capacity_units - coalesce(live.units, 0), 0) AS spare,
        least(coalesce(live.memory_mib, 0), g.memory_mib) AS alloc_mem
    FROM gpus g JOIN nodes n ON n.hostname = g.node LEFT JOIN live ON live.gpu_uuid = g.uuid
    {where}
)
SELECT {dimension} AS dimension, {key} AS key,
    coalesce(sum(capacity_units), 0) AS total_units,
    coalesce(sum(alloc), 0) AS allocated_units,
    coalesce(sum(spare) FILTER (WHERE avail), 0) AS free_units,
    coalesce(sum(spare) FILTER (WHERE NOT avail), 0) AS unavailable_units,
    coalesce(sum(spare) FILTER (WHERE avail AND used), 0) AS fragmented_units,
    count(*) AS total_gpus,
    count(*) FILTER (WHERE used) AS in_use_gpus,
    count(*) FILTER (WHERE avail AND NOT used) AS free_gpus,
    count(*) FILTER (WHERE NOT avail) AS unavailable_gpus,
    coalesce(sum(memory_mib), 0) AS total_memory_mib,
    coalesce(sum(alloc_mem), 0) AS allocated_memory_mib,
    coalesce(sum(memory_mib - alloc_mem) FILTER (WHERE avail), 0) AS free_memory_mib
FROM f GROUP BY GROUPING SETS ({sets})
"""
_FIGURE_FIELDS = tuple(CapacityFigures.model_fields)


def _where(filters: Mapping[str, str | None], *, columns: Mapping[str, str]) -> tuple[str, list[Any]]:
    clauses, args = [], []
    for name, value in filters.items():
        if value is not None:
            args.append(value)
            clauses.append(f"{columns[name]} = ${len(args)}")
    return ("WHERE " + " AND ".join(clauses)) if clauses else "", args


def _gpu_out(row: asyncpg.Record) -> GpuOut:
    ts = None
    if row["ts_ratio"] is not None:
        ts = TimeSliceOut(
            ratio=row["ts_ratio"], workload_kind=row["ts_workload_kind"], warnings=list(row["ts_warnings"])
        )
    return GpuOut(
        uuid=row["uuid"],
        node=row["node"],
        index=row["idx"],
        model=row["model"],
        memory_mib=row["memory_mib"],
        pci_bus_id=row["pci_bus_id"],
        nvlink_peers=list(row["nvlink_peers"]),
        mig_enabled=row["mig_enabled"],
        health=row["health"],
        units=row["units"],
        capacity_units=row["capacity_units"],
        time_slice=ts,
        pool=row["pool"],
        zone=row["zone"],
        region=row["region"],
    )


def partition_out(row: Mapping[str, Any]) -> PartitionOut:
    """A partition row as the API shows it."""
    return PartitionOut(**{k: row[k] for k in PartitionOut.model_fields if k != "slot"}, slot=row["start"])


async def list_nodes(
    conn: asyncpg.Connection[Any], *, filters: Mapping[str, str | None], limit: int, offset: int
) -> list[NodeOut]:
    """Nodes matching the filters (pool, zone)."""
    where, args = _where(filters, columns={"pool": "n.pool", "zone": "n.zone"})
    rows = await conn.fetch(SELECT_NODES.format(where=where, limit=limit, offset=offset), *args)
    return [NodeOut(**{k: r[k] for k in NodeOut.model_fields}) for r in rows]


async def list_gpus(
    conn: asyncpg.Connection[Any], *, filters: Mapping[str, str | None], limit: int, offset: int
) -> list[GpuOut]:
    """GPUs matching the filters (node, model, pool, zone, health)."""
    where, args = _where(filters, columns=_FILTER_COLUMNS)
    rows = await conn.fetch(SELECT_GPUS.format(where=where, limit=limit, offset=offset), *args)
    return [_gpu_out(r) for r in rows]


async def list_partitions(
    conn: asyncpg.Connection[Any], *, filters: Mapping[str, str | None], limit: int, offset: int
) -> list[PartitionOut]:
    """Partitions of the GPUs matching the filters (gpu, node, model, pool, zone)."""
    where, args = _where(filters, columns=_FILTER_COLUMNS)
    rows = await conn.fetch(SELECT_PARTITIONS.format(where=where, limit=limit, offset=offset), *args)
    return [partition_out(r) for r in rows]


async def capacity(
    conn: asyncpg.Connection[Any], *, filters: Mapping[str, str | None], group_by: Sequence[str]
) -> CapacityOut:
    """The capacity summary of the GPUs matching the filters, with one map per requested grouping."""
    where, args = _where(filters, columns=_FILTER_COLUMNS)
    columns = [GROUPINGS[g] for g in group_by]
    sets = ", ".join(["()", *(f"({c})" for c in columns)])
    whens = " ".join(f"WHEN GROUPING({c}) = 0 THEN '{g}'" for g, c in zip(group_by, columns, strict=True))
    dimension = f"CASE {whens} ELSE 'total' END" if group_by else "'total'"
    key = "coalesce(" + ", ".join([*(f"{c}::text" for c in columns), "''"]) + ")"
    sql = CAPACITY.format(where=where, dimension=dimension, key=key, sets=sets)
    result: dict[str, Any] = {f"by_{g}": {} for g in group_by}
    for row in await conn.fetch(sql, *args):
        figures = CapacityFigures(**{k: row[k] for k in _FIGURE_FIELDS})
        if row["dimension"] == "total":
            result["total"] = figures
        else:
            result[f"by_{row['dimension']}"][row["key"]] = figures
    return CapacityOut(**result)


async def gpu_detail(conn: asyncpg.Connection[Any], *, gpu_uuid: str, tenant: str | None) -> GpuDetail | None:
    """One GPU with partitions, the allocations the caller may see, capacity and health history."""
    rows = await conn.fetch(SELECT_GPUS.format(where="WHERE g.uuid = $1", limit=1, offset=0), gpu_uuid)
    if not rows:
        return None
    gpu = _gpu_out(rows[0])
    parts = await list_partitions(conn, filters={"gpu": gpu_uuid}, limit=64, offset=0)
    allocations = await conn.fetch(SELECT_ALLOCATIONS_OF_GPU, gpu_uuid, tenant)
    history = await conn.fetch(SELECT_HEALTH_OF_GPU, gpu_uuid)
    figures = (await capacity(conn, filters={"gpu": gpu_uuid}, group_by=())).total
    return GpuDetail(
        **gpu.model_dump(),
        partitions=parts,
        allocations=[AllocationOut(**{k: a[k] for k in AllocationOut.model_fields}) for a in allocations],
        capacity=figures,
        health_history=[HealthEntry(**{k: h[k] for k in HealthEntry.model_fields}) for h in history],
    )
