"""asyncpg SQL for the GPU view (from inventory events) and tenant policy: shares, quotas, usage, stops."""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal
from typing import Any

import asyncpg

from services.scheduler.adapters.postgres import NOTIFY_WAKE, WAKE_CHANNEL
from services.scheduler.domain.stored import (
    FairShareInputs,
    PolicySnapshot,
    StoredGpu,
    StoredQuota,
    columns_of,
)

__all__ = ["FleetStore", "fair_share_of", "stored_quota"]

#: Bumps the fleet version and answers it: first in every GPU-changing statement (so two transactions
#: never wait on each other in opposite order), its row lock held to commit.
_BUMPED = "bumped AS (UPDATE fleet_version SET version = version + 1 RETURNING version)"
#: Several registrations as one statement (one row per GPU: a unit of work keeps only its last of each),
#: each row stamped with the fleet version it bumped.
UPSERT_GPUS = f"""
WITH {_BUMPED}
INSERT INTO gpus (gpu_uuid, node, model, memory_bytes, units, health, labels, mig_enabled, time_slice_ratio,
    partitions, updated_at, version)
SELECT u, n, m, mem, un, h, l::jsonb, mig, r, p::jsonb, now(), bumped.version
FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::numeric[], $6::text[], $7::text[],
    $8::bool[], $9::int[], $10::text[]) AS v(u, n, m, mem, un, h, l, mig, r, p), bumped
ON CONFLICT (gpu_uuid) DO UPDATE SET node = excluded.node, model = excluded.model,
    memory_bytes = excluded.memory_bytes, units = excluded.units, health = excluded.health,
    labels = excluded.labels, mig_enabled = excluded.mig_enabled,
    time_slice_ratio = excluded.time_slice_ratio, partitions = excluded.partitions, updated_at = now(),
    version = excluded.version
"""
#: A GPU row's columns in UPSERT_GPUS's order (labels and partitions as JSON text).
_GPU_COLUMNS = (
    "gpu_uuid",
    "node",
    "model",
    "memory_bytes",
    "units",
    "health",
    "labels",
    "mig_enabled",
    "time_slice_ratio",
    "partitions",
)
_JSON_COLUMNS = frozenset({"labels", "partitions"})
SET_PARTITIONS = f"""
WITH {_BUMPED}
UPDATE gpus SET mig_enabled = $2, time_slice_ratio = $3, partitions = $4, updated_at = now(),
    version = bumped.version
FROM bumped WHERE gpu_uuid = $1
"""
SET_HEALTH = f"""
WITH {_BUMPED}
UPDATE gpus SET health = $2, updated_at = now(), version = bumped.version FROM bumped WHERE gpu_uuid = $1
"""
ALL_GPUS = f"SELECT {columns_of(StoredGpu)} FROM gpus ORDER BY node, gpu_uuid"
GPUS_SINCE = f"SELECT {columns_of(StoredGpu)} FROM gpus WHERE version > $1"
NODE_GPUS = f"SELECT {columns_of(StoredGpu)} FROM gpus WHERE node = $1 ORDER BY gpu_uuid"
#: The fair-share inputs as one row of arrays (what ``pass_inputs.book_from_row`` reads): select
#: FAIR_SHARE_COLUMNS from FAIR_SHARE_SOURCES, beside whatever else a statement needs.
FAIR_SHARE_COLUMNS = (
    "g.capacity, u.usage_tenants, u.usage_values, u.usage_as_of, s.share_tenants, s.share_values, "
    "t.tenant_ids"
)
FAIR_SHARE_SOURCES = """(SELECT coalesce(sum(units), 0) AS capacity FROM gpus WHERE health = 'healthy') g,
    (SELECT array_agg(tenant_id) AS usage_tenants, array_agg(decayed_unit_hours) AS usage_values,
        array_agg(as_of) AS usage_as_of FROM tenant_usage) u,
    (SELECT array_agg(tenant_id) AS share_tenants, array_agg(shares) AS share_values FROM tenant_shares) s,
    (SELECT array_agg(tenant_id) AS tenant_ids FROM tenants) t"""
POLICY_SNAPSHOT = f"""
SELECT v.version, {FAIR_SHARE_COLUMNS},
    q.quota_tenants, q.quota_gpus, q.quota_units, q.quota_workloads
FROM (SELECT coalesce(max(version), 0) AS version FROM fleet_version) v,
    {FAIR_SHARE_SOURCES},
    (SELECT array_agg(tenant_id) AS quota_tenants, array_agg(gpus) AS quota_gpus,
        array_agg(units_milli) AS quota_units, array_agg(workloads) AS quota_workloads FROM tenant_quotas) q
"""
UPSERT_SHARES = """
INSERT INTO tenant_shares (tenant_id, shares) VALUES ($1, $2)
ON CONFLICT (tenant_id) DO UPDATE SET shares = $2, updated_at = now()
"""
UPSERT_QUOTA = """
INSERT INTO tenant_quotas (tenant_id, gpus, units_milli, workloads) VALUES ($1, $2, $3, $4)
ON CONFLICT (tenant_id) DO UPDATE SET gpus = $2, units_milli = $3, workloads = $4, updated_at = now()
"""
ALL_QUOTAS = f"SELECT {columns_of(StoredQuota)} FROM tenant_quotas"
GET_QUOTA = f"SELECT {columns_of(StoredQuota)} FROM tenant_quotas WHERE tenant_id = $1"
SET_USAGE = """
INSERT INTO tenant_usage (tenant_id, decayed_unit_hours, as_of) VALUES ($1, $2, $3)
ON CONFLICT (tenant_id) DO UPDATE SET decayed_unit_hours = $2, as_of = $3
"""
TENANT_EXISTS = "SELECT 1 FROM tenants WHERE tenant_id = $1"
FLEET_MODELS = "SELECT DISTINCT model FROM gpus"
ADD_STOP = """
INSERT INTO budget_stops (tenant_id, project, month, reason) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING
"""


class FleetStore:
    """GPU rows and per-tenant policy rows on one connection (or the pool, for reads).

    Every GPU-changing statement bumps the fleet version itself and stamps the rows it changes with it.
    ``in_transaction``: the store of one transaction (the unit of work's). It then wakes the placer once
    for the whole transaction rather than per change (the placer reads only committed snapshots, so once
    is as good as many), and keeps GPU registrations until ``flush`` (before its next statement on GPUs,
    and at the unit of work's commit) writes them as one statement: a consumer batch of thousands of
    registrations costs two round trips, not three per GPU.
    """

    def __init__(
        self, conn: asyncpg.Connection[Any] | asyncpg.Pool[Any], *, in_transaction: bool = False
    ) -> None:
        self.conn = conn
        self._in_transaction = in_transaction
        self._registered: dict[str, dict[str, Any]] = {}
        self._wake = False

    async def flush(self) -> None:
        """Write what this transaction's store kept: the registrations, and the placer's wake-up."""
        if self._registered:
            rows, self._registered = list(self._registered.values()), {}
            await self.conn.execute(UPSERT_GPUS, *_gpu_columns(rows))
        if self._wake:
            self._wake = False
            await self.conn.execute(NOTIFY_WAKE, WAKE_CHANNEL)

    async def upsert_gpu(self, *, row: dict[str, Any]) -> None:
        """Record a GPU's static facts, health and partitions (a transaction's store: at ``flush``)."""
        if self._in_transaction:
            self._registered[row["gpu_uuid"]] = row  # a GPU's last registration replaces every fact
        else:
            await self.conn.execute(UPSERT_GPUS, *_gpu_columns([row]))

    async def set_partitions(
        self, gpu_uuid: str, *, mig_enabled: bool, ratio: int, partitions: list[dict[str, Any]]
    ) -> None:
        """Replace a GPU's slices."""
        await self.flush()
        await self.conn.execute(SET_PARTITIONS, gpu_uuid, mig_enabled, ratio, partitions)

    async def set_health(self, gpu_uuid: str, *, health: str) -> None:
        """Record a GPU's health."""
        await self.flush()
        await self.conn.execute(SET_HEALTH, gpu_uuid, health)

    async def wake_placer(self) -> None:
        """Wake the active placer for the fleet's change (delivered at commit; a transaction's store asks
        once, at ``flush``)."""
        if self._in_transaction:
            self._wake = True
        else:
            await self.conn.execute(NOTIFY_WAKE, WAKE_CHANNEL)

    async def pass_policy(self) -> PolicySnapshot:
        """In one round trip: the fleet version, fair-share inputs and every tenant's quota."""
        row = await self.conn.fetchrow(POLICY_SNAPSHOT)
        assert row is not None  # aggregates without GROUP BY always answer one row
        columns = ("quota_tenants", "quota_gpus", "quota_units", "quota_workloads")
        quotas = tuple(StoredQuota(*q) for q in zip(*(row[c] or () for c in columns), strict=True))
        return PolicySnapshot(version=int(row["version"]), fair_share=fair_share_of(row), quotas=quotas)

    async def gpus(self) -> list[StoredGpu]:
        """Every GPU known, by node."""
        return [StoredGpu(*r) for r in await self.conn.fetch(ALL_GPUS)]

    async def gpus_since(self, version: int) -> list[StoredGpu]:
        """The GPUs changed under a fleet version after ``version`` (in no particular order)."""
        return [StoredGpu(*r) for r in await self.conn.fetch(GPUS_SINCE, version)]

    async def node_gpus(self, node: str) -> list[StoredGpu]:
        """The GPUs of one node."""
        await self.flush()
        return [StoredGpu(*r) for r in await self.conn.fetch(NODE_GPUS, node)]

    async def set_shares(self, tenant: str, *, shares: float) -> None:
        """Set a tenant's fair-share entitlement weight."""
        await self.conn.execute(UPSERT_SHARES, tenant, shares)

    async def set_quota(
        self, tenant: str, *, gpus: int | None, units_milli: int | None, workloads: int | None
    ) -> None:
        """Set a tenant's limits (None = unlimited)."""
        await self.conn.execute(UPSERT_QUOTA, tenant, gpus, units_milli, workloads)

    async def quotas(self) -> list[StoredQuota]:
        """Every tenant's limits."""
        return [StoredQuota(*r) for r in await self.conn.fetch(ALL_QUOTAS)]

    async def quota(self, tenant: str) -> StoredQuota | None:
        """One tenant's limits."""
        found = await self.conn.fetchrow(GET_QUOTA, tenant)
        return None if found is None else StoredQuota(*found)

    async def set_usage(self, tenant: str, *, value: float, as_of: datetime) -> None:
        """Replace a tenant's decayed usage."""
        await self.conn.execute(SET_USAGE, tenant, value, as_of)

    async def models(self) -> set[str]:
        """The models of every GPU known."""
        return {r["model"] for r in await self.conn.fetch(FLEET_MODELS)}

    async def tenant_exists(self, tenant: str) -> bool:
        """Whether the tenant was created."""
        return bool(await self.conn.fetchval(TENANT_EXISTS, tenant))

    async def add_stop(self, *, tenant: str, project: str, month: str, reason: str) -> None:
        """Refuse new work for a project this month."""
        await self.conn.execute(ADD_STOP, tenant, project, month, reason)


def _gpu_columns(rows: list[dict[str, Any]]) -> list[list[Any]]:
    """GPU rows as UPSERT_GPUS's arrays, column by column."""
    return [[json.dumps(r[c]) if c in _JSON_COLUMNS else r[c] for r in rows] for c in _GPU_COLUMNS]


def fair_share_of(row: asyncpg.Record) -> FairShareInputs:
    """The fair-share inputs of a row that selected FAIR_SHARE_COLUMNS."""
    usage = zip(row["usage_tenants"] or (), row["usage_values"] or (), row["usage_as_of"] or (), strict=True)
    shares = zip(row["share_tenants"] or (), row["share_values"] or (), strict=True)
    return FairShareInputs(
        capacity=row["capacity"],
        usage=tuple((t, float(v), at) for t, v, at in usage),
        shares=tuple((t, float(v)) for t, v in shares),
        tenant_ids=frozenset(row["tenant_ids"] or ()),
    )


def stored_quota(row: asyncpg.Record) -> StoredQuota:
    """The quota of a row that selected tenant_id, gpus, units_milli and workloads."""
    return StoredQuota(row["tenant_id"], row["gpus"], row["units_milli"], row["workloads"])


def units_of(value: Decimal | float) -> float:
    """Compute units as the float the placement core works in."""
    return float(value)
