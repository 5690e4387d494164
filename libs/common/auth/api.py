"""The tenant admin API: create tenants, issue and revoke their keys. Mounted by one service."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, Request, status
from pydantic import BaseModel, ConfigDict, Field, field_validator

from libs.common.auth.keys import issue_key, valid_tenant_id
from libs.common.auth.principal import Admin
from libs.common.auth.replication import store_key, store_tenant
from libs.common.db.uow import UnitOfWork
from libs.common.events.platform import ApiKeyIssuedV1, ApiKeyRevokedV1, TenantCreatedV1
from libs.common.http.errors import Conflict, NotFound

__all__ = ["router"]

_REVOKE = (
    "UPDATE api_keys SET revoked_at = now() WHERE key_id = $1 AND revoked_at IS NULL RETURNING tenant_id"
)

router = APIRouter(prefix="/v1/admin", tags=["tenants"])


class TenantCreate(BaseModel):
    """A new tenant."""

    model_config = ConfigDict(extra="forbid")

    tenant_id: str = Field(description="Lower-case slug: letters, digits, dashes; 2-63 characters.")
    name: str = Field(min_length=1, max_length=200, description="Display name.")

    @field_validator("tenant_id")
    @classmethod
    def _slug(cls, value: str) -> str:
        if not valid_tenant_id(value):
            raise ValueError("must be a lower-case slug of letters, digits and dashes, 2-63 characters")
        return value


class IssuedKeyOut(BaseModel):
    """A key as issued: the secret is shown here once and never again."""

    key_id: str
    tenant_id: str | None
    role: str
    api_key: str = Field(description="The secret; store it now, it cannot be retrieved later.")


class TenantOut(BaseModel):
    """A tenant."""

    tenant_id: str
    name: str
    created_at: datetime


class TenantCreated(BaseModel):
    """A created tenant and its first key."""

    tenant: TenantOut
    key: IssuedKeyOut


@router.post("/tenants", status_code=status.HTTP_201_CREATED)
async def create_tenant(body: TenantCreate, request: Request, _: Admin) -> TenantCreated:
    runtime = request.app.state.runtime
    event = TenantCreatedV1(tenant_id=body.tenant_id, name=body.name)
    async with runtime.uow() as uow:
        if await uow.conn.fetchval("SELECT 1 FROM tenants WHERE tenant_id = $1", body.tenant_id):
            raise Conflict(f"tenant {body.tenant_id!r} already exists", field="tenant_id")
        await store_tenant(uow.conn, event)
        await uow.emit(event, tenant=body.tenant_id)
        key = await _issue(uow, body.tenant_id)
        row = await uow.conn.fetchrow("SELECT * FROM tenants WHERE tenant_id = $1", body.tenant_id)
        await uow.commit()
    return TenantCreated(tenant=TenantOut(**dict(row)), key=key)


@router.get("/tenants")
async def list_tenants(request: Request, _: Admin) -> list[TenantOut]:
    rows = await request.app.state.runtime.pool.fetch("SELECT * FROM tenants ORDER BY tenant_id")
    return [TenantOut(**dict(r)) for r in rows]


@router.post("/tenants/{tenant_id}/keys", status_code=status.HTTP_201_CREATED)
async def issue_tenant_key(tenant_id: str, request: Request, _: Admin) -> IssuedKeyOut:
    async with request.app.state.runtime.uow() as uow:
        if not await uow.conn.fetchval("SELECT 1 FROM tenants WHERE tenant_id = $1", tenant_id):
            raise NotFound(f"no tenant {tenant_id!r}", field="tenant_id")
        key = await _issue(uow, tenant_id)
        await uow.commit()
    return key


@router.delete("/keys/{key_id}", status_code=status.HTTP_204_NO_CONTENT)
async def revoke_key(key_id: str, request: Request, _: Admin) -> None:
    async with request.app.state.runtime.uow() as uow:
        row = await uow.conn.fetchrow(_REVOKE, key_id)
        if row is None:
            raise NotFound(f"no active key {key_id!r}", field="key_id")
        await uow.emit(ApiKeyRevokedV1(key_id=key_id, tenant_id=row["tenant_id"]), tenant=row["tenant_id"])
        await uow.commit()
    request.app.state.runtime.key_cache.evict_key(key_id)


async def _issue(uow: UnitOfWork, tenant_id: str) -> IssuedKeyOut:
    issued = issue_key()
    event = ApiKeyIssuedV1(key_id=issued.key_id, tenant_id=tenant_id, role="tenant", key_hash=issued.key_hash)
    await store_key(uow.conn, event)
    await uow.emit(event, tenant=tenant_id)
    return IssuedKeyOut(key_id=issued.key_id, tenant_id=tenant_id, role="tenant", api_key=issued.secret)
