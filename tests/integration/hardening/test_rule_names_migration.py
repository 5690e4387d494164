"""Migration 0002 makes rule names unique per owner and keeps every rule written before it."""

from __future__ import annotations

import asyncpg
import pytest

from libs.common.db.migrate import migrate, service_migrations
from tests.integration.support import Isolation

INSERT = "INSERT INTO rules (name, owner_tenant, spec) VALUES ($1, $2, '{}')"


async def test_old_rules_survive_and_names_become_unique_per_owner(isolation: Isolation) -> None:
    dsn, schema = isolation.infra.database_url, isolation.schema("alerting")
    everything = service_migrations("alerting")
    before = [m for m in everything if not m.id.startswith("alerting/") or m.id.endswith("/0001_init.sql")]
    await migrate(dsn=dsn, schema=schema, migrations=before)
    conn = await asyncpg.connect(dsn, server_settings={"search_path": schema})
    try:
        await conn.executemany(INSERT, [("GpuLost", None), ("Hot", "acme")])
        with pytest.raises(asyncpg.UniqueViolationError):
            await conn.execute(INSERT, "Hot", "globex")  # one namespace across tenants, before

        applied = await migrate(dsn=dsn, schema=schema, migrations=everything)
        assert "alerting/0002_rule_names_per_tenant.sql" in applied
        await conn.execute(INSERT, "Hot", "globex")
        for name, owner in (("Hot", "acme"), ("GpuLost", None)):
            with pytest.raises(asyncpg.UniqueViolationError):
                await conn.execute(INSERT, name, owner)
        rows = await conn.fetch("SELECT name, owner_tenant FROM rules ORDER BY name, owner_tenant")
        assert [tuple(r) for r in rows] == [("GpuLost", None), ("Hot", "acme"), ("Hot", "globex")]
    finally:
        await conn.close()
