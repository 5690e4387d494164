"""asyncpg pools bound to one service's schema."""

from __future__ import annotations

import json
from typing import Any

import asyncpg

__all__ = ["create_pool", "init_connection"]


async def init_connection(conn: asyncpg.Connection[Any]) -> None:
    """Decode json/jsonb columns to Python objects on every pooled connection."""
    for name in ("json", "jsonb"):
        await conn.set_type_codec(name, encoder=json.dumps, decoder=json.loads, schema="pg_catalog")


async def _keep_session(_conn: asyncpg.Connection[Any]) -> None:
    """Nothing to reset: the borrowers of a stateless pool leave no session state behind."""


async def create_pool(
    *, dsn: str, schema: str, max_size: int = 10, min_size: int = 1, stateless: bool = False
) -> asyncpg.Pool[Any]:
    """Open a pool whose connections resolve unqualified names in ``schema`` first.

    ``stateless``: every borrower only runs statements and transactions (no LISTEN, SET, session
    advisory lock or open cursor), so asyncpg's reset query, one round trip on every release, is skipped.
    """
    pool = await asyncpg.create_pool(
        dsn=dsn,
        min_size=min_size,
        max_size=max_size,
        server_settings={"search_path": f"{schema},public", "application_name": f"gpucloud-{schema}"},
        init=init_connection,
        reset=_keep_session if stateless else None,
    )
    assert pool is not None
    return pool
