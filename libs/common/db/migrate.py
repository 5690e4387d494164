"""Numbered, forward-only SQL migrations, one Postgres schema per service.

Safe when several replicas start at once: the whole run holds a transaction-level advisory lock
keyed by the schema, so the second replica waits and then finds nothing left to apply.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.resources
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg

__all__ = ["PLATFORM_MIGRATIONS", "Migration", "discover", "migrate", "service_migrations"]

log = logging.getLogger(__name__)

_FILE = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")
PLATFORM_MIGRATIONS = Path(__file__).with_name("migrations")
SERVICES = ("inventory", "scheduler", "telemetry", "alerting", "billing", "recovery")


@dataclass(frozen=True, slots=True)
class Migration:
    """One SQL file, identified by its set (platform or the service) and file name."""

    id: str
    sql: str


def discover(directory: Path, *, label: str) -> list[Migration]:
    """The migrations in a directory, in numeric order; refuses badly named files."""
    migrations = []
    for path in sorted(directory.glob("*.sql")):
        if not _FILE.match(path.name):
            raise ValueError(f"migration file {path} must be named NNNN_name.sql")
        migrations.append(Migration(id=f"{label}/{path.name}", sql=path.read_text()))
    return migrations


def service_migrations(service: str) -> list[Migration]:
    """Platform migrations followed by the service's own (services/<name>/migrations)."""
    own = Path(str(importlib.resources.files(f"services.{service}"))) / "migrations"
    found = discover(PLATFORM_MIGRATIONS, label="platform")
    if own.is_dir():
        found += discover(own, label=service)
    return found


async def migrate(*, dsn: str, schema: str, migrations: list[Migration]) -> list[str]:
    """Apply pending migrations into ``schema``; returns the ids applied now."""
    conn: asyncpg.Connection[Any] = await asyncpg.connect(dsn)
    try:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", f"gpucloud.migrate.{schema}")
            await conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
            await conn.execute(f'SET LOCAL search_path TO "{schema}", public')
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations "
                "(id text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
            )
            done = {r["id"] for r in await conn.fetch("SELECT id FROM schema_migrations")}
            applied = []
            for migration in migrations:
                if migration.id in done:
                    continue
                await conn.execute(migration.sql)
                await conn.execute("INSERT INTO schema_migrations (id) VALUES ($1)", migration.id)
                applied.append(migration.id)
        return applied
    finally:
        await conn.close()


async def _main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Apply every service's migrations.")
    parser.add_argument("--dsn", default=None, help="defaults to DATABASE_DIRECT_URL, else DATABASE_URL")
    parser.add_argument("services", nargs="*", default=list(SERVICES))
    args = parser.parse_args(argv)
    from libs.common.settings import BaseServiceSettings, session_url

    settings = BaseServiceSettings()
    direct = args.dsn or settings.database_direct_url
    for service in args.services:
        dsn = session_url(database_url=settings.database_url, direct_url=direct, schema=service)
        applied = await migrate(dsn=dsn, schema=service, migrations=service_migrations(service))
        print(f"{service}: {len(applied)} migration(s) applied" + (f" {applied}" if applied else ""))


if __name__ == "__main__":
    asyncio.run(_main())
