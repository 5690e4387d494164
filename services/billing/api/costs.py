"""Cost analysis API: amounts and compute-unit-hours grouped by project, team, model, day or tag."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from libs.common.auth import Caller, tenant_filter
from libs.common.http import Unprocessable
from libs.common.http.errors import error_responses
from services.billing.adapters import ledger_queries
from services.billing.api.params import End, Start, TenantQ, window

__all__ = ["router"]

router = APIRouter(tags=["ledger"])


@router.get("/v1/costs", responses=error_responses(403))
async def cost_analysis(
    request: Request,
    caller: Caller,
    group_by: Annotated[str, Query(description="project, team, model, day or tag:<key>.")] = "project",
    tenant_id: TenantQ = None,
    start: Start = None,
    end: End = None,
) -> dict[str, Any]:
    lo, hi = window(start, end)
    grouping, _, tag = group_by.partition(":")
    if grouping not in ledger_queries.GROUPINGS or (grouping == "tag") != bool(tag):
        raise Unprocessable("group_by must be project, team, model, day or tag:<key>", field="group_by")
    rows = await ledger_queries.costs(
        request.app.state.runtime.pool,
        tenant_id=tenant_filter(caller, tenant_id),
        group_by=grouping,
        tag=tag or None,
        start=lo,
        end=hi,
    )
    groups = [
        {"key": g.key, "amount_micro": g.amount_micro, "compute_unit_hours": g.compute_unit_hours}
        for g in rows
    ]
    return {"group_by": group_by, "total_micro": sum(g["amount_micro"] for g in groups), "groups": groups}
