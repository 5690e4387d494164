"""What a store contract test needs: a migrated schema of one service and units of work over a store.

A handler gets its store from the unit of work the consumer runner opened for one delivery
(``ctx.uow.fleet``), so a contract test takes the store the same way, one unit of work per step:
``async with units() as store`` commits at the end of the step, ``async with units.rolled_back() as store``
leaves without committing. The fake's units open the service's fake unit of work (the same one each time,
so its fake stores keep what committed steps wrote and drop the rest); the real store's units open the
service's Postgres unit of work on its migrated schema.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Generic, TypeVar

import asyncpg

from libs.common.bus.handlers import UnitOfWorkType
from libs.common.db import UnitOfWork, create_pool, migrate, service_migrations
from tests.integration.support import Isolation

__all__ = ["Units", "fake_units", "service_pool", "sql_units"]

S = TypeVar("S")
S_co = TypeVar("S_co", covariant=True)
U = TypeVar("U", bound=UnitOfWork)


class Units(Generic[S_co]):
    """Steps of a contract test: a unit of work open for the block, and the store is the one of it."""

    def __init__(self, open_uow: Callable[[], UnitOfWork], store_of: Callable[[Any], S_co]) -> None:
        self._open = open_uow
        self._store_of = store_of

    def __call__(self) -> AbstractAsyncContextManager[S_co]:
        """A step that commits at its end."""
        return self._step(commit=True)

    def rolled_back(self) -> AbstractAsyncContextManager[S_co]:
        """A step that ends without committing: nothing it wrote may be kept."""
        return self._step(commit=False)

    @asynccontextmanager
    async def _step(self, *, commit: bool) -> AsyncIterator[S_co]:
        async with self._open() as uow:
            yield self._store_of(uow)
            if commit:
                await uow.commit()


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


def fake_units(uow: U, store_of: Callable[[U], S]) -> Units[S]:
    """Steps on the service's fake unit of work ``uow`` (the same one each time), handing out its store."""
    return Units(lambda: uow, store_of)


def sql_units(pool: asyncpg.Pool[Any], uow_type: UnitOfWorkType[U], store_of: Callable[[U], S]) -> Units[S]:
    """Steps on the service's Postgres unit of work on ``pool``, handing out ``store_of(uow)``."""
    return Units(lambda: uow_type(pool=pool, source="contract"), store_of)
