"""Idle API: the warnings and release requests of idle reclaim."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from libs.common.auth import Caller, tenant_filter
from services.billing.adapters import config_queries
from services.billing.api.params import TenantQ

__all__ = ["router"]

router = APIRouter(tags=["configuration"])


@router.get("/v1/idle/actions")
async def list_idle_actions(
    request: Request, caller: Caller, tenant_id: TenantQ = None
) -> list[dict[str, Any]]:
    rows = await config_queries.idle_actions(
        request.app.state.runtime.pool, tenant_id=tenant_filter(caller, tenant_id)
    )
    return [dict(r) for r in rows]
