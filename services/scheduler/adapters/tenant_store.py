"""Tenants and their API keys in the scheduler's schema (the platform topic replicates them to the others)."""

from __future__ import annotations

import asyncpg

from libs.common.auth.replication import store_key, store_tenant
from libs.common.events.platform import ApiKeyIssuedV1, TenantCreatedV1
from services.scheduler.adapters.postgres import Conn
from services.scheduler.domain.tenants import Tenant

__all__ = ["TenantStore"]

_EXISTS = "SELECT 1 FROM tenants WHERE tenant_id = $1"
_GET = "SELECT tenant_id, name, created_at FROM tenants WHERE tenant_id = $1"
_LIST = "SELECT tenant_id, name, created_at FROM tenants ORDER BY tenant_id"
_REVOKE = (
    "UPDATE api_keys SET revoked_at = now() WHERE key_id = $1 AND revoked_at IS NULL RETURNING tenant_id"
)


def _tenant(row: asyncpg.Record) -> Tenant:
    return Tenant(tenant_id=row["tenant_id"], name=row["name"], created_at=row["created_at"])


class TenantStore:
    """Reads and writes of the tenants and api_keys tables; never commits."""

    def __init__(self, conn: Conn) -> None:
        self._conn = conn

    async def exists(self, tenant_id: str) -> bool:
        """Whether the tenant is known."""
        return bool(await self._conn.fetchval(_EXISTS, tenant_id))

    async def get(self, tenant_id: str) -> Tenant | None:
        """The tenant, or None."""
        row = await self._conn.fetchrow(_GET, tenant_id)
        return None if row is None else _tenant(row)

    async def all(self) -> list[Tenant]:
        """Every tenant, by id."""
        return [_tenant(r) for r in await self._conn.fetch(_LIST)]

    async def add(self, event: TenantCreatedV1) -> None:
        """Record a tenant (as every service's replica does)."""
        await store_tenant(self._conn, event)

    async def add_key(self, event: ApiKeyIssuedV1) -> None:
        """Record an issued key's hash."""
        await store_key(self._conn, event)

    async def revoke(self, key_id: str) -> str | None:
        """Revoke an active key; its tenant, or None when no active key has that id."""
        tenant = await self._conn.fetchval(_REVOKE, key_id)
        return None if tenant is None else str(tenant)
