"""asyncpg pools bound to one service's schema."""

from __future__ import annotations

import json
from typing import Any

import asyncpg

__all__ = ["CUSTOM_PLANS", "create_pool", "init_connection"]


async def init_connection(conn: asyncpg.Connection[Any]) -> None:
    """Decode json/jsonb columns to Python objects on every pooled connection."""
    for name in ("json", "jsonb"):
        await conn.set_type_codec(name, encoder=json.dumps, decoder=json.loads, schema="pg_catalog")


async def _keep_session(_conn: asyncpg.Connection[Any]) -> None:
    """Nothing to reset: the borrowers of a stateless pool leave no session state behind."""


#: Plan every execution of a prepared statement for the table as it is now. A generic plan made while a
#: table was nearly empty (a fresh schema) is a sequential scan, and Postgres keeps using it until the
#: next ANALYZE however large the table grows: the relay's read of unsent outbox rows or the placer's
#: read of live placements then scans the whole history on every call.
CUSTOM_PLANS = {"plan_cache_mode": "force_custom_plan"}


async def create_pool(
    *,
    dsn: str,
    schema: str,
    max_size: int = 10,
    min_size: int = 1,
    stateless: bool = False,
    custom_plans: bool = False,
) -> asyncpg.Pool[Any]:
    """Open a pool whose connections resolve unqualified names in ``schema`` first.

    ``stateless``: every borrower only runs statements and transactions (no LISTEN, SET, session
    advisory lock or open cursor), so asyncpg's reset query, one round trip on every release, is skipped.
    ``custom_plans``: for a few hot statements over fast-growing tables (see ``CUSTOM_PLANS``); planning
    each execution costs a little, a stale generic plan can cost a full scan.
    """
    settings = {"search_path": f"{schema},public", "application_name": f"gpucloud-{schema}"}
    pool = await asyncpg.create_pool(
        dsn=dsn,
        min_size=min_size,
        max_size=max_size,
        server_settings=settings | (CUSTOM_PLANS if custom_plans else {}),
        init=init_connection,
        reset=_keep_session if stateless else None,
    )
    assert pool is not None
    return pool
