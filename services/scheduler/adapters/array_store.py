"""asyncpg SQL for job arrays: what a submission decides on, the array and its workloads as one statement,
and the answers kept under a client's key."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from libs.common.db.uow import OutboxRow, outbox_columns
from services.scheduler.adapters.fleet_store import (
    FAIR_SHARE_COLUMNS,
    FAIR_SHARE_SOURCES,
    fair_share_of,
    stored_quota,
)
from services.scheduler.adapters.postgres import WAKE_CHANNEL, Conn
from services.scheduler.domain.stored import ArrayContext, StoredArray, columns_of

__all__ = ["ArrayRows", "ArrayStore"]

ARRAY = columns_of(StoredArray)

#: As SUBMIT_CONTEXT, for many projects ($2) and with the array kept under the request's key ($4), if any.
ARRAY_CONTEXT = f"""
SELECT {FAIR_SHARE_COLUMNS},
    q.tenant_id, q.gpus, q.units_milli, q.workloads, b.projects, b.reasons, c.waiting, k.array_id AS known
FROM {FAIR_SHARE_SOURCES},
    (SELECT count(*) AS waiting FROM workloads WHERE state IN ('queued', 'migrating')) c
    LEFT JOIN LATERAL (SELECT * FROM tenant_quotas WHERE tenant_id = $1) q ON true
    LEFT JOIN LATERAL (
        SELECT array_agg(project ORDER BY project) AS projects, array_agg(reason ORDER BY project) AS reasons
        FROM budget_stops WHERE tenant_id = $1 AND project = ANY($2::text[]) AND month = $3
    ) b ON true
    LEFT JOIN LATERAL (
        SELECT array_id FROM workload_arrays WHERE tenant_id = $1 AND client_key = $4
    ) k ON true
"""
#: A job array as one statement (so one implicit transaction): the array row, unless its key is taken
#: (a concurrent twin's insert waits for the first to commit, then conflicts; then nothing at all is
#: written), every workload row ($5 ids, in item order), their outbox rows in order, and the placer's and
#: relay's wake-ups at commit. Answers whether it was written.
INSERT_ARRAY = f"""
WITH a AS (
    INSERT INTO workload_arrays ({ARRAY})
    VALUES ($1, $2, $3, $4, $5::text[], $6::float8[], $7, $8)
    ON CONFLICT (tenant_id, client_key) DO NOTHING
    RETURNING array_id
), w AS (
    INSERT INTO workloads (workload_id, tenant_id, kind, state, spec, urgency, preemptible, tags,
        submitted_at, priority, traceparent, run_spec, array_id, array_index)
    SELECT v.wid, $2, v.kind, 'queued', v.spec::jsonb, v.urgency, v.pre, v.tags::jsonb, $8, v.prio, $9,
        v.run::jsonb, $1, v.n - 1
    FROM unnest($5::text[], $10::text[], $11::text[], $12::float8[], $13::bool[], $14::text[], $6::float8[],
        $15::text[]) WITH ORDINALITY AS v(wid, kind, spec, urgency, pre, tags, prio, run, n)
    WHERE EXISTS (SELECT 1 FROM a)
), o AS (
    INSERT INTO outbox (event_id, topic, key, payload, traceparent)
    SELECT event_id, topic, key, payload, traceparent
    FROM unnest($16::uuid[], $17::text[], $18::text[], $19::bytea[], $20::text[]) WITH ORDINALITY
        AS v(event_id, topic, key, payload, traceparent, n)
    WHERE EXISTS (SELECT 1 FROM a)
    ORDER BY n
)
SELECT EXISTS (SELECT 1 FROM a) AS written, pg_notify($21, current_schema()) AS woke_placer,
    pg_notify('gpucloud_outbox', current_schema()) AS woke_relay
"""
ARRAY_BY_KEY = f"SELECT {ARRAY} FROM workload_arrays WHERE tenant_id = $1 AND client_key = $2"
GET_ARRAY = f"""
SELECT {ARRAY} FROM workload_arrays WHERE array_id = $1 AND ($2::text IS NULL OR tenant_id = $2)
"""


@dataclass(frozen=True, slots=True)
class ArrayRows:
    """The workload columns of an array, one list per column in item order (JSON columns as JSON text);
    the ids and priorities are the array's own."""

    kinds: Sequence[str]
    specs: Sequence[str]
    urgencies: Sequence[float]
    preemptible: Sequence[bool]
    tags: Sequence[str]
    run_specs: Sequence[str]


class ArrayStore:
    """Job array rows on one connection (or the pool); never commits."""

    def __init__(self, conn: Conn) -> None:
        self.conn = conn

    async def context(
        self, *, tenant: str, projects: Sequence[str], month: str, key: str | None
    ) -> ArrayContext:
        """Fair-share inputs, the tenant's quota, the stopped projects, the queue length and the array
        already kept under ``key``, in one snapshot."""
        row = await self.conn.fetchrow(ARRAY_CONTEXT, tenant, list(projects), month, key)
        assert row is not None  # aggregates without GROUP BY always answer one row
        existing = None if row["known"] is None or key is None else await self.by_key(tenant=tenant, key=key)
        return ArrayContext(
            fair_share=fair_share_of(row),
            quota=stored_quota(row) if row["tenant_id"] is not None else None,
            stops=dict(zip(row["projects"] or (), row["reasons"] or (), strict=True)),
            waiting=int(row["waiting"]),
            existing=existing,
        )

    async def insert(
        self,
        *,
        array: StoredArray,
        rows: ArrayRows,
        traceparent: str | None,
        outbox: Sequence[OutboxRow],
    ) -> bool:
        """Record the array, its queued workloads and their outbox rows, and wake placer and relay, as one
        statement; False (nothing written) when its key is already taken."""
        a = array
        written: bool = await self.conn.fetchval(
            INSERT_ARRAY,
            a.array_id,
            a.tenant_id,
            a.client_key,
            a.body_sha256,
            list(a.workload_ids),
            list(a.priorities),
            a.first_position,
            a.submitted_at,
            traceparent,
            list(rows.kinds),
            list(rows.specs),
            list(rows.urgencies),
            list(rows.preemptible),
            list(rows.tags),
            list(rows.run_specs),
            *outbox_columns(outbox),
            WAKE_CHANNEL,
        )
        return written

    async def by_key(self, *, tenant: str, key: str) -> StoredArray | None:
        """The array a tenant submitted under ``key``."""
        found = await self.conn.fetchrow(ARRAY_BY_KEY, tenant, key)
        return None if found is None else StoredArray(*found)

    async def array(self, array_id: str, *, tenant: str | None) -> StoredArray | None:
        """An array, visible to ``tenant`` (None = any)."""
        found = await self.conn.fetchrow(GET_ARRAY, array_id, tenant)
        return None if found is None else StoredArray(*found)
