"""Postgres: pools bound to a service schema, the unit of work, and migrations."""

from libs.common.db.migrate import Migration, migrate, service_migrations
from libs.common.db.pool import create_pool
from libs.common.db.uow import PostgresUnitOfWork, UnitOfWork

__all__ = ["Migration", "PostgresUnitOfWork", "UnitOfWork", "create_pool", "migrate", "service_migrations"]
