"""Every service keeps a local copy of tenants and API keys, fed from the platform topic."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from libs.common.bus.consumer import Handler, HandlerContext
from libs.common.events import Event
from libs.common.events.platform import ApiKeyIssuedV1, ApiKeyRevokedV1, TenantCreatedV1

__all__ = ["HANDLERS", "store_key", "store_tenant"]

_UPSERT_TENANT = (
    "INSERT INTO tenants (tenant_id, name) VALUES ($1, $2) ON CONFLICT (tenant_id) DO UPDATE SET name = $2"
)
_INSERT_KEY = (
    "INSERT INTO api_keys (key_id, key_hash, tenant_id, role) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING"
)
_REVOKE_KEY = "UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE key_id = $1"


async def store_tenant(conn: Any, event: TenantCreatedV1) -> None:
    """Record a tenant (idempotent)."""
    await conn.execute(_UPSERT_TENANT, event.tenant_id, event.name)


async def store_key(conn: Any, event: ApiKeyIssuedV1) -> None:
    """Record an issued key's hash (idempotent)."""
    await conn.execute(_INSERT_KEY, event.key_id, event.key_hash, event.tenant_id, event.role)


async def handle_tenant_created(event: TenantCreatedV1, ctx: HandlerContext) -> None:
    await store_tenant(ctx.uow.conn, event)


async def handle_key_issued(event: ApiKeyIssuedV1, ctx: HandlerContext) -> None:
    await store_key(ctx.uow.conn, event)


async def handle_key_revoked(event: ApiKeyRevokedV1, ctx: HandlerContext) -> None:
    await ctx.uow.conn.execute(_REVOKE_KEY, event.key_id)


HANDLERS: Mapping[type[Event], Handler] = {
    TenantCreatedV1: handle_tenant_created,
    ApiKeyIssuedV1: handle_key_issued,
    ApiKeyRevokedV1: handle_key_revoked,
}
