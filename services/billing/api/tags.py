"""Tag API: required-tag policies, tenant default tags and flagged workloads."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from libs.common.auth import Caller, tenant_filter
from services.billing.adapters import config_queries
from services.billing.adapters.policy_store import PolicyStore
from services.billing.api.params import TenantQ, one_tenant
from services.billing.api.schemas import TagPolicyIn, TenantTagsIn

__all__ = ["router"]

router = APIRouter(tags=["configuration"])


@router.put("/v1/tags/policy")
async def put_tag_policy(body: TagPolicyIn, request: Request, caller: Caller) -> dict[str, Any]:
    tenant = one_tenant(caller, body.tenant_id)
    async with request.app.state.runtime.uow() as uow:
        await PolicyStore(uow.conn).set_required(tenant, body.required)
        await uow.commit()
    return {"tenant_id": tenant, "required": sorted(set(body.required))}


@router.put("/v1/tags/defaults")
async def put_tenant_tags(body: TenantTagsIn, request: Request, caller: Caller) -> dict[str, Any]:
    tenant = one_tenant(caller, body.tenant_id)
    async with request.app.state.runtime.uow() as uow:
        await PolicyStore(uow.conn).set_tenant_tags(tenant, body.tags)
        await uow.commit()
    return {"tenant_id": tenant, "tags": body.tags}


@router.get("/v1/tags/violations")
async def list_violations(
    request: Request, caller: Caller, tenant_id: TenantQ = None
) -> list[dict[str, Any]]:
    rows = await config_queries.tag_violations(
        request.app.state.runtime.pool, tenant_id=tenant_filter(caller, tenant_id)
    )
    return [dict(r) for r in rows]
