"""Every service keeps a local copy of tenants and API keys, fed from the platform topic."""

from __future__ import annotations

from typing import Any

from libs.common.bus.handlers import HandlerContext, Handlers
from libs.common.events.platform import ApiKeyIssuedV1, ApiKeyRevokedV1, TenantCreatedV1

__all__ = [
    "HANDLERS",
    "on_api_key_issued",
    "on_api_key_revoked",
    "on_tenant_created",
    "store_key",
    "store_tenant",
]

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


async def on_tenant_created(event: TenantCreatedV1, ctx: HandlerContext) -> None:
    await store_tenant(ctx.uow.conn, event)


async def on_api_key_issued(event: ApiKeyIssuedV1, ctx: HandlerContext) -> None:
    await store_key(ctx.uow.conn, event)


async def on_api_key_revoked(event: ApiKeyRevokedV1, ctx: HandlerContext) -> None:
    await ctx.uow.conn.execute(_REVOKE_KEY, event.key_id)


#: The platform consumer's handlers (no deps): every service runs them over the platform topic.
HANDLERS: Handlers[None] = (
    Handlers(None)
    .on(TenantCreatedV1, on_tenant_created)
    .on(ApiKeyIssuedV1, on_api_key_issued)
    .on(ApiKeyRevokedV1, on_api_key_revoked)
)
