"""Budget API: monthly project budgets with this month's spend."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Request, Response, status

from libs.common.auth import Caller, tenant_filter
from libs.common.http.errors import error_responses
from services.billing.adapters import config_queries
from services.billing.adapters.budget_store import BudgetStore
from services.billing.api import errors
from services.billing.api.params import Project, TenantQ, one_tenant
from services.billing.api.schemas import BudgetIn
from services.billing.domain.budgets import BudgetSpend, month_of

__all__ = ["router"]

router = APIRouter(tags=["configuration"])


@router.get("/v1/budgets", responses=error_responses(403))
async def list_budgets(request: Request, caller: Caller, tenant_id: TenantQ = None) -> list[dict[str, Any]]:
    month = month_of(datetime.now(UTC))
    rows = await config_queries.budgets(
        request.app.state.runtime.pool, tenant_id=tenant_filter(caller, tenant_id), month=month
    )
    return [_budget(b) for b in rows]


@router.put("/v1/budgets/{project}", responses=error_responses(403))
async def put_budget(project: Project, body: BudgetIn, request: Request, caller: Caller) -> dict[str, Any]:
    tenant = one_tenant(caller, body.tenant_id)
    await BudgetStore(request.app.state.runtime.pool).put(
        tenant, project, limit_micro=body.limit_micro, thresholds=body.thresholds, hard_stop=body.hard_stop
    )
    return {"tenant_id": tenant, "project": project, **body.model_dump(exclude={"tenant_id"})}


@router.delete(
    "/v1/budgets/{project}", status_code=status.HTTP_204_NO_CONTENT, responses=error_responses(403, 404)
)
async def delete_budget(
    project: Project, request: Request, caller: Caller, tenant_id: TenantQ = None
) -> Response:
    tenant = one_tenant(caller, tenant_id)
    if not await BudgetStore(request.app.state.runtime.pool).delete(tenant, project):
        raise errors.no_budget(project)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


def _budget(b: BudgetSpend) -> dict[str, Any]:
    return {
        "tenant_id": b.budget.tenant_id,
        "project": b.budget.project,
        "limit_micro": b.budget.limit_micro,
        "thresholds": list(b.budget.thresholds),
        "hard_stop": b.budget.hard_stop,
        "spent_micro": b.state.spent_micro,
        "crossed": sorted(b.state.crossed),
        "month": b.state.month,
    }
