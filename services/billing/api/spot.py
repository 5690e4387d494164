"""Spot API: what moving interruption-tolerant workloads to spot would save."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi import APIRouter, Request

from libs.common.auth import Caller
from libs.common.http.errors import error_responses
from services.billing.adapters import ledger_queries
from services.billing.api.params import TenantQ, api_settings, one_tenant
from services.billing.domain.spot import spot_report
from services.billing.service.unit_of_work import billing_uow

__all__ = ["router"]

router = APIRouter(tags=["configuration"])


@router.get("/v1/spot-advice", responses=error_responses(403))
async def spot_advice(request: Request, caller: Caller, tenant_id: TenantQ = None) -> dict[str, Any]:
    tenant = one_tenant(caller, tenant_id)
    now = datetime.now(UTC)
    since = now - timedelta(days=api_settings(request).spot_window_days)
    async with billing_uow(request.app.state.runtime) as uow:
        prices = await uow.prices.price_list()
        usages = await ledger_queries.spot_usages(uow.conn, tenant_id=tenant, since=since)
    report = spot_report(tenant_id=tenant, usages=usages, prices=prices, at=now)
    return {
        "tenant_id": tenant,
        "window_days": api_settings(request).spot_window_days,
        "current_cost_micro": report.current_cost_micro,
        "saving_micro": report.saving_micro,
        "saving_pct": str(report.saving_pct),
        "advices": [
            {
                "workload_id": a.workload_id,
                "resource": a.resource.label(),
                "on_demand_micro": a.on_demand_micro,
                "spot_micro": a.spot_micro,
                "saving_micro": a.saving_micro,
                "saving_pct": str(a.saving_pct),
            }
            for a in report.advices
        ],
    }
