"""Idle API: the warnings and release requests of idle reclaim."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from fastapi import APIRouter, Request

from libs.common.auth import Caller, tenant_filter
from libs.common.http.errors import error_responses
from services.billing.adapters import config_queries
from services.billing.api.params import TenantQ

__all__ = ["router"]

router = APIRouter(tags=["configuration"])


@router.get("/v1/idle/actions", responses=error_responses(403))
async def list_idle_actions(
    request: Request, caller: Caller, tenant_id: TenantQ = None
) -> list[dict[str, Any]]:
    rows = await config_queries.idle_actions(
        request.app.state.runtime.pool, tenant_id=tenant_filter(caller, tenant_id)
    )
    return [asdict(a) for a in rows]
