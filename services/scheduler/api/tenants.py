"""The tenant admin API: create tenants, issue and revoke their keys (admin keys only)."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, Request, status
from pydantic import BaseModel, ConfigDict, Field, field_validator

from libs.common.auth.keys import valid_tenant_id
from libs.common.auth.principal import Admin
from libs.common.http.errors import error_responses
from services.scheduler.adapters.tenant_store import TenantStore
from services.scheduler.api.access import ctx_of
from services.scheduler.domain.tenants import IssuedKey, Tenant
from services.scheduler.service import tenants

__all__ = ["router"]

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


def _tenant_out(tenant: Tenant) -> TenantOut:
    return TenantOut(tenant_id=tenant.tenant_id, name=tenant.name, created_at=tenant.created_at)


def _key_out(key: IssuedKey) -> IssuedKeyOut:
    return IssuedKeyOut(key_id=key.key_id, tenant_id=key.tenant_id, role=key.role, api_key=key.api_key)


@router.post("/tenants", status_code=status.HTTP_201_CREATED, responses=error_responses(409))
async def create_tenant(body: TenantCreate, request: Request, _: Admin) -> TenantCreated:
    async with ctx_of(request).uow() as uow:
        tenant, key = await tenants.create_tenant(uow, tenant_id=body.tenant_id, name=body.name)
    return TenantCreated(tenant=_tenant_out(tenant), key=_key_out(key))


@router.get("/tenants")
async def list_tenants(request: Request, _: Admin) -> list[TenantOut]:
    return [_tenant_out(t) for t in await TenantStore(request.app.state.runtime.pool).all()]


@router.post("/tenants/{tenant_id}/keys", status_code=status.HTTP_201_CREATED, responses=error_responses(404))
async def issue_tenant_key(tenant_id: str, request: Request, _: Admin) -> IssuedKeyOut:
    async with ctx_of(request).uow() as uow:
        return _key_out(await tenants.issue_tenant_key(uow, tenant_id=tenant_id))


@router.delete("/keys/{key_id}", status_code=status.HTTP_204_NO_CONTENT, responses=error_responses(404))
async def revoke_key(key_id: str, request: Request, _: Admin) -> None:
    async with ctx_of(request).uow() as uow:
        await tenants.revoke_key(uow, key_id=key_id)
    request.app.state.runtime.key_cache.evict_key(key_id)
