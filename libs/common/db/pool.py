"""asyncpg pools bound to one service's schema."""

from __future__ import annotations

import json
from typing import Any

import asyncpg

__all__ = ["QUEUE_READS", "create_pool", "init_connection"]


async def init_connection(conn: asyncpg.Connection[Any]) -> None:
    """Decode json/jsonb columns to Python objects on every pooled connection."""
    for name in ("json", "jsonb"):
        await conn.set_type_codec(name, encoder=json.dumps, decoder=json.loads, schema="pg_catalog")


async def _keep_session(_conn: asyncpg.Connection[Any]) -> None:
    """Nothing to reset: the borrowers of a stateless pool leave no session state behind."""


#: Settings for a connection whose hot statements read the live tail of a queue-like table (the outbox's
#: unsent rows, the waiting workloads, the live placements) through a partial index.
#:
#: - ``plan_cache_mode``: plan every execution for the table as it is now. A generic plan made while a
#:   table was nearly empty (a fresh schema) is a sequential scan, and Postgres keeps using it until the
#:   next ANALYZE however large the table grows: the read then scans the whole history on every call.
#: - ``enable_bitmapscan`` off: rows leave such an index all the time (sent, placed, ended) and their
#:   entries stay until a vacuum. A plain index scan marks the entries it finds dead so the next read skips
#:   them; a bitmap scan (the planner's pick for a few hundred expected rows) never does, so every read
#:   visits the whole pile again. Measured at 100 submissions/s, 15-20 s in: 7,116 outbox entries and
#:   837 heap pages visited for 6 unsent rows (2 ms a read); 1,737 entries for 11 waiting workloads.
#:
#: With bitmap scans gone and no statistics yet, the planner may still prefer a sequential scan to a partial
#: index it expects to return many rows; an ``ORDER BY`` on the index's columns with a ``LIMIT`` makes the
#: index the cheaper plan. (Turning sequential scans off for a whole pool is no cure: a statement of
#: single-row aggregates over small tables then took 150-200 ms.)
QUEUE_READS = {"plan_cache_mode": "force_custom_plan", "enable_bitmapscan": "off"}


async def create_pool(
    *,
    dsn: str,
    schema: str,
    max_size: int = 10,
    min_size: int = 1,
    stateless: bool = False,
    queue_reads: bool = False,
) -> asyncpg.Pool[Any]:
    """Open a pool whose connections resolve unqualified names in ``schema`` first.

    ``stateless``: every borrower only runs statements and transactions (no LISTEN, SET, session
    advisory lock or open cursor), so asyncpg's reset query, one round trip on every release, is skipped.
    ``queue_reads``: every connection gets ``QUEUE_READS``, for a pool whose statements read queue-like
    tables through their indexes; planning each execution costs a little, a stale plan a full scan.
    """
    settings = {"search_path": f"{schema},public", "application_name": f"gpucloud-{schema}"}
    pool = await asyncpg.create_pool(
        dsn=dsn,
        min_size=min_size,
        max_size=max_size,
        server_settings=settings | (QUEUE_READS if queue_reads else {}),
        init=init_connection,
        reset=_keep_session if stateless else None,
    )
    assert pool is not None
    return pool
