"""asyncpg pools bound to one service's schema, and waiting at start-up for a database not up yet."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import asyncpg

__all__ = [
    "QUEUE_READS",
    "UNREACHABLE",
    "PoolerMisconfigured",
    "create_pool",
    "init_connection",
    "retry_while_unreachable",
]

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Errors that say Postgres is not there yet (refused, reset, timed out, starting up, out of connection
#: slots), as opposed to a configuration a retry cannot fix (a wrong password, a missing database).
UNREACHABLE: tuple[type[Exception], ...] = (
    OSError,  # ConnectionRefusedError, ConnectionResetError, TimeoutError, socket.gaierror
    asyncpg.PostgresConnectionError,
    asyncpg.CannotConnectNowError,
    asyncpg.TooManyConnectionsError,
)


async def retry_while_unreachable(
    attempt: Callable[[], Awaitable[T]],
    *,
    what: str,
    timeout_s: float,
    first_delay_s: float = 0.5,
    max_delay_s: float = 10.0,
) -> T:
    """``attempt()``, tried again with exponential backoff while it fails with ``UNREACHABLE``.

    A service started before its database (a machine booting, a database restarting) waits for it rather
    than exiting; each failed attempt is logged with the wait before the next. After ``timeout_s`` the last
    error is raised, so a database that never comes still stops the start-up, with the reason.
    """
    loop = asyncio.get_running_loop()
    deadline, delay, number = loop.time() + timeout_s, first_delay_s, 1
    while True:
        try:
            return await attempt()
        except UNREACHABLE as exc:
            left = deadline - loop.time()
            if left <= 0:
                log.error("%s still unreachable after %d attempt(s); giving up: %r", what, number, exc)
                raise
            wait = min(delay, left)
            log.warning(
                "%s unreachable (attempt %d: %r); retrying in %.1fs, giving up in %.0fs",
                what,
                number,
                exc,
                wait,
                left,
            )
            await asyncio.sleep(wait)
            delay, number = min(delay * 2, max_delay_s), number + 1


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


class PoolerMisconfigured(RuntimeError):
    """Behind a transaction pooler, the server connections do not resolve names in the service's schema."""


async def create_pool(
    *,
    dsn: str,
    schema: str,
    max_size: int = 10,
    min_size: int = 1,
    stateless: bool = False,
    queue_reads: bool = False,
    pooled: bool = False,
) -> asyncpg.Pool[Any]:
    """Open a pool whose connections resolve unqualified names in ``schema`` first.

    ``stateless``: every borrower only runs statements and transactions (no LISTEN, SET, session
    advisory lock or open cursor), so asyncpg's reset query, one round trip on every release, is skipped.
    ``queue_reads``: every connection gets ``QUEUE_READS``, for a pool whose statements read queue-like
    tables through their indexes; planning each execution costs a little, a stale plan a full scan.

    ``pooled``: ``dsn`` is a pooler in transaction mode (PgBouncer's ``pool_mode = transaction``), which
    hands each transaction whatever server connection is free. Then no statement is prepared under a
    name (asyncpg's statement cache is off: a name prepared on one server connection is unknown on the
    next), nothing but ``application_name`` goes in the start-up packet (PgBouncer refuses other
    parameters), and a connection going back to the pool is not reset (``RESET ALL`` would run on a
    server connection another client gets next). The schema must come from the pooler: a database entry
    of its own per service whose ``connect_query`` sets ``search_path`` (README.md); the pool checks
    it and raises ``PoolerMisconfigured`` otherwise. ``queue_reads`` cannot be set per session there
    either: put ``QUEUE_READS`` in the scheduler's ``connect_query`` too (without it, the queue reads
    stay correct and may scan more).
    """
    app = {"application_name": f"gpucloud-{schema}"}
    if pooled:
        pool = await asyncpg.create_pool(
            dsn=dsn,
            min_size=min_size,
            max_size=max_size,
            server_settings=app,
            statement_cache_size=0,
            init=init_connection,
            reset=_keep_session,
        )
    else:
        settings = app | {"search_path": f"{schema},public"} | (QUEUE_READS if queue_reads else {})
        pool = await asyncpg.create_pool(
            dsn=dsn,
            min_size=min_size,
            max_size=max_size,
            server_settings=settings,
            init=init_connection,
            reset=_keep_session if stateless else None,
        )
    assert pool is not None
    if pooled:
        await _check_pooled_schema(pool, schema)
    return pool


async def _check_pooled_schema(pool: asyncpg.Pool[Any], schema: str) -> None:
    path = await pool.fetchval("SHOW search_path")
    if schema not in [part.strip().strip('"') for part in str(path).split(",")]:
        await pool.close()
        raise PoolerMisconfigured(
            f"behind the transaction pooler, search_path is {path!r}, without the schema {schema!r}: "
            f"give this service a pooler database entry whose connect_query sets "
            f"search_path TO {schema}, public (README.md, 'Behind PgBouncer')"
        )
