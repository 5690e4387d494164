"""Usage API: decayed (fair-share) usage per tenant, and publishing it now."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi import APIRouter, Request

from libs.common.auth import Admin, Caller, tenant_filter
from libs.common.http.errors import error_responses
from services.billing.adapters import ledger_queries
from services.billing.api.params import TenantQ, api_settings
from services.billing.service.loops import publish_decayed_usage

__all__ = ["router"]

router = APIRouter(tags=["configuration"])


@router.get("/v1/usage/decayed", responses=error_responses(403))
async def get_decayed_usage(request: Request, caller: Caller, tenant_id: TenantQ = None) -> dict[str, Any]:
    half_life = timedelta(hours=api_settings(request).usage_half_life_h)
    usage = await ledger_queries.decayed_usage(
        request.app.state.runtime.pool,
        now=datetime.now(UTC),
        half_life=half_life,
        tenant_id=tenant_filter(caller, tenant_id),
    )
    return {
        "half_life_hours": api_settings(request).usage_half_life_h,
        "tenants": {k: str(v) for k, v in usage.items()},
    }


@router.post("/v1/admin/usage/publish")
async def publish_usage(request: Request, _: Admin) -> dict[str, int]:
    half_life = timedelta(hours=api_settings(request).usage_half_life_h)
    count = await publish_decayed_usage(request.app.state.runtime, now=datetime.now(UTC), half_life=half_life)
    return {"published": count}
