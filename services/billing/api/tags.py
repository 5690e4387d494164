"""Tag API: required-tag policies, tenant default tags and flagged workloads."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from fastapi import APIRouter, Request

from libs.common.auth import Caller, tenant_filter
from libs.common.http.errors import error_responses
from services.billing.adapters import config_queries
from services.billing.api.params import TenantQ, one_tenant
from services.billing.api.schemas import TagPolicyIn, TenantTagsIn
from services.billing.service.unit_of_work import billing_uow

__all__ = ["router"]

router = APIRouter(tags=["configuration"])


@router.put("/v1/tags/policy", responses=error_responses(403))
async def put_tag_policy(body: TagPolicyIn, request: Request, caller: Caller) -> dict[str, Any]:
    tenant = one_tenant(caller, body.tenant_id)
    async with billing_uow(request.app.state.runtime) as uow:
        await uow.policies.set_required(tenant, body.required)
        await uow.commit()
    return {"tenant_id": tenant, "required": sorted(set(body.required))}


@router.put("/v1/tags/defaults", responses=error_responses(403))
async def put_tenant_tags(body: TenantTagsIn, request: Request, caller: Caller) -> dict[str, Any]:
    tenant = one_tenant(caller, body.tenant_id)
    async with billing_uow(request.app.state.runtime) as uow:
        await uow.policies.set_tenant_tags(tenant, body.tags)
        await uow.commit()
    return {"tenant_id": tenant, "tags": body.tags}


@router.get("/v1/tags/violations", responses=error_responses(403))
async def list_violations(
    request: Request, caller: Caller, tenant_id: TenantQ = None
) -> list[dict[str, Any]]:
    rows = await config_queries.tag_violations(
        request.app.state.runtime.pool, tenant_id=tenant_filter(caller, tenant_id)
    )
    return [asdict(v) for v in rows]
