"""Tenant administration: create a tenant with its first key, issue more keys, revoke one."""

from __future__ import annotations

from libs.common.auth.keys import issue_key
from libs.common.events.platform import ApiKeyIssuedV1, ApiKeyRevokedV1, TenantCreatedV1
from libs.common.http.errors import Conflict, NotFound
from services.scheduler.adapters.tenant_store import TenantStore
from services.scheduler.domain.tenants import IssuedKey, Tenant
from services.scheduler.service.unit_of_work import SchedulerUnitOfWork

__all__ = ["create_tenant", "issue_tenant_key", "revoke_key"]


async def create_tenant(uow: SchedulerUnitOfWork, *, tenant_id: str, name: str) -> tuple[Tenant, IssuedKey]:
    """A new tenant and its first key, with both events, in ``uow`` (committed here)."""
    store = uow.tenants
    if await store.exists(tenant_id):
        raise Conflict(f"tenant {tenant_id!r} already exists", field="tenant_id")
    event = TenantCreatedV1(tenant_id=tenant_id, name=name)
    await store.add(event)
    await uow.emit(event, tenant=tenant_id)
    key = await _issue(uow, store, tenant_id)
    tenant = await store.get(tenant_id)
    assert tenant is not None  # written just above, in this transaction
    await uow.commit()
    return tenant, key


async def issue_tenant_key(uow: SchedulerUnitOfWork, *, tenant_id: str) -> IssuedKey:
    """One more key for a known tenant (committed here)."""
    store = uow.tenants
    if not await store.exists(tenant_id):
        raise NotFound(f"no tenant {tenant_id!r}", field="tenant_id")
    key = await _issue(uow, store, tenant_id)
    await uow.commit()
    return key


async def revoke_key(uow: SchedulerUnitOfWork, *, key_id: str) -> None:
    """Revoke an active key and say so on the platform topic (committed here)."""
    tenant = await uow.tenants.revoke(key_id)
    if tenant is None:
        raise NotFound(f"no active key {key_id!r}", field="key_id")
    await uow.emit(ApiKeyRevokedV1(key_id=key_id, tenant_id=tenant), tenant=tenant)
    await uow.commit()


async def _issue(uow: SchedulerUnitOfWork, store: TenantStore, tenant_id: str) -> IssuedKey:
    issued = issue_key()
    event = ApiKeyIssuedV1(key_id=issued.key_id, tenant_id=tenant_id, role="tenant", key_hash=issued.key_hash)
    await store.add_key(event)
    await uow.emit(event, tenant=tenant_id)
    return IssuedKey(key_id=issued.key_id, tenant_id=tenant_id, role="tenant", api_key=issued.secret)
