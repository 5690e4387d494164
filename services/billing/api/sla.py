"""SLA API: each tenant's policy (admin), the credit decisions a tenant sees, and the explanation of one
charge line (or credit): the events behind it, its price, its routing and the credits against it."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Request

from libs.common.auth import Admin, Caller, tenant_filter
from libs.common.http import NotFound
from libs.common.http.errors import error_responses
from services.billing.adapters import explain_queries
from services.billing.api.params import End, Limit, Offset, Start, TenantQ, window
from services.billing.api.schemas import SlaPolicyIn
from services.billing.domain.sla import SlaPolicy
from services.billing.service.unit_of_work import billing_uow

__all__ = ["router"]

router = APIRouter(tags=["ledger"])

Tenant = Annotated[str, Path(min_length=1, max_length=63, description="The tenant whose policy it is.")]


@router.get("/v1/admin/tenants/{tenant}/sla", tags=["configuration"])
async def get_sla_policy(tenant: Tenant, request: Request, _: Admin) -> dict[str, Any]:
    async with billing_uow(request.app.state.runtime) as uow:
        own = await uow.sla.policy(tenant)
    return _policy(tenant, own or request.app.state.runtime.settings.sla_policy, own is not None)


@router.put("/v1/admin/tenants/{tenant}/sla", tags=["configuration"], responses=error_responses(422))
async def put_sla_policy(tenant: Tenant, body: SlaPolicyIn, request: Request, _: Admin) -> dict[str, Any]:
    policy = SlaPolicy(
        fault_classes=frozenset(body.fault_classes),
        credit_rate=body.credit_rate,
        monthly_cap_micro=body.monthly_cap_micro,
    )
    async with billing_uow(request.app.state.runtime) as uow:
        await uow.sla.put_policy(tenant, policy)
        await uow.commit()
    return _policy(tenant, policy, True)


@router.get("/v1/credits", responses=error_responses(403))
async def list_credits(
    request: Request,
    caller: Caller,
    tenant_id: TenantQ = None,
    start: Start = None,
    end: End = None,
    limit: Limit = 1000,
    offset: Offset = 0,
) -> list[dict[str, Any]]:
    lo, hi = window(start, end)
    rows = await explain_queries.credit_decisions(
        request.app.state.runtime.pool,
        tenant_id=tenant_filter(caller, tenant_id),
        start=lo,
        end=hi,
        limit=limit,
        offset=offset,
    )
    return [explain_queries.credit_view(c) for c in rows]


@router.get("/v1/charges/{entry_id:path}/explain", responses=error_responses(404))
async def explain_charge(entry_id: str, request: Request, caller: Caller) -> dict[str, Any]:
    explained = await explain_queries.explain_entry(
        request.app.state.runtime.pool, entry_id=entry_id, tenant_id=tenant_filter(caller, None)
    )
    if explained is None:
        raise NotFound(f"no charge {entry_id!r}", field="entry_id")
    return explained


def _policy(tenant: str, policy: SlaPolicy, own: bool) -> dict[str, Any]:
    return {
        "tenant_id": tenant,
        "source": "tenant" if own else "default",
        "fault_classes": sorted(c.value for c in policy.fault_classes),
        "credit_rate": str(policy.credit_rate),
        "monthly_cap_micro": policy.monthly_cap_micro,
    }
