"""What a store contract test needs: a migrated schema of one service and units of work over a store.

A handler gets its store from the unit of work the consumer runner opened for one delivery, so a contract
test takes the store the same way, one unit of work per step: ``async with units() as store``. The fake's
units hand out the same fake each time (a ``FakeUnitOfWork`` around it); the real store's units open a
``PostgresUnitOfWork`` on the service's migrated schema and commit it at the end of the step.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, TypeAlias, TypeVar

import asyncpg

from libs.common.db import PostgresUnitOfWork, UnitOfWork, create_pool, migrate, service_migrations
from libs.common.testing import FakeUnitOfWork
from tests.integration.support import Isolation

__all__ = ["Units", "fake_units", "service_pool", "sql_units"]

S = TypeVar("S")

#: One step of a contract test: a unit of work is open for the block, and the store is the one of it.
Units: TypeAlias = Callable[[], AbstractAsyncContextManager[S]]


@asynccontextmanager
async def service_pool(isolation: Isolation, service: str) -> AsyncIterator[asyncpg.Pool[Any]]:
    """A small pool on this test's schema of ``service``, with the service's migrations applied."""
    schema = isolation.schema(service)
    dsn = isolation.infra.database_url
    await migrate(dsn=dsn, schema=schema, migrations=service_migrations(service))
    pool = await create_pool(dsn=dsn, schema=schema, max_size=2)
    try:
        yield pool
    finally:
        await pool.close()


def fake_units(store: S) -> Units[S]:
    """Units of work that all hand out ``store``, as a unit test's deps do."""

    @asynccontextmanager
    async def unit() -> AsyncIterator[S]:
        async with FakeUnitOfWork() as uow:
            yield store
            await uow.commit()

    return unit


def sql_units(pool: asyncpg.Pool[Any], store_of: Callable[[UnitOfWork], S]) -> Units[S]:
    """Units of work on ``pool``, each committed after its step, handing out ``store_of(uow)``."""

    @asynccontextmanager
    async def unit() -> AsyncIterator[S]:
        async with PostgresUnitOfWork(pool=pool, source="contract") as uow:
            yield store_of(uow)
            await uow.commit()

    return unit
