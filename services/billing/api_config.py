"""Configuration and advice API: prices, budgets, tag policies, spot advice, fair share, reconciliation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi import APIRouter, Request, Response, status
from pydantic import BaseModel, ConfigDict, Field, field_validator

from libs.common.auth import Admin, Caller, tenant_filter
from libs.common.http import Conflict, NotFound, Unprocessable
from services.billing import views
from services.billing.api import TenantQ, one_tenant
from services.billing.budgets import DEFAULT_THRESHOLDS, month_of
from services.billing.loops import accrue_all, metering_config, publish_decayed_usage
from services.billing.prices import PriceBasis, PriceEntry, PricingClass, ResourceKey, RetroactivePriceError
from services.billing.reconciliation import reconcile_ledger
from services.billing.settings import BillingSettings
from services.billing.spot import spot_report
from services.billing.store import SELECT_PRICES, PolicyStore, PriceStore

__all__ = ["router"]

router = APIRouter(tags=["configuration"])

UPSERT_BUDGET = """
INSERT INTO budgets (tenant_id, project, limit_micro, thresholds, hard_stop) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (tenant_id, project)
DO UPDATE SET limit_micro = $3, thresholds = $4, hard_stop = $5, updated_at = now()
"""
SELECT_BUDGETS = """
SELECT b.tenant_id, b.project, b.limit_micro, b.thresholds, b.hard_stop,
       coalesce(s.spent_micro, 0) AS spent_micro, coalesce(s.crossed, '{}') AS crossed
FROM budgets b
LEFT JOIN budget_state s ON s.tenant_id = b.tenant_id AND s.project = b.project AND s.month = $2
WHERE ($1::text IS NULL OR b.tenant_id = $1) ORDER BY 1, 2
"""
DELETE_BUDGET = "DELETE FROM budgets WHERE tenant_id = $1 AND project = $2 RETURNING 1"
SELECT_VIOLATIONS = (
    "SELECT * FROM tag_violations WHERE ($1::text IS NULL OR tenant_id = $1) ORDER BY flagged_at"
)
SELECT_IDLE_ACTIONS = "SELECT * FROM idle_actions WHERE ($1::text IS NULL OR tenant_id = $1) ORDER BY at"


def _settings(request: Request) -> BillingSettings:
    settings = request.app.state.runtime.settings
    assert isinstance(settings, BillingSettings)
    return settings


class PriceIn(BaseModel):
    """A new price version; it may not take effect in the past."""

    model_config = ConfigDict(extra="forbid")

    price_id: str = Field(min_length=1, max_length=200)
    gpu_model: str = Field(min_length=1, max_length=100, description="Catalog model, or 'default'.")
    mig_profile: str | None = Field(default=None, max_length=50)
    share_of: int | None = Field(default=None, ge=2, le=64)
    pricing_class: PricingClass
    basis: PriceBasis
    micro_per_hour: int = Field(ge=0, description="Micro-currency per basis-unit-hour.")
    effective_from: datetime
    effective_to: datetime | None = None


@router.get("/v1/prices")
async def list_prices(request: Request, _: Caller) -> list[dict[str, Any]]:
    rows = await request.app.state.runtime.pool.fetch(SELECT_PRICES)
    return [dict(r) for r in rows]


@router.post("/v1/admin/prices", status_code=status.HTTP_201_CREATED)
async def create_price(body: PriceIn, request: Request, _: Admin) -> dict[str, Any]:
    try:
        entry = PriceEntry(
            price_id=body.price_id,
            resource=ResourceKey(
                gpu_model=body.gpu_model, mig_profile=body.mig_profile, share_of=body.share_of
            ),
            pricing_class=body.pricing_class,
            basis=body.basis,
            micro_per_hour=body.micro_per_hour,
            effective_from=body.effective_from,
            effective_to=body.effective_to,
        )
    except ValueError as exc:
        raise Unprocessable(str(exc), field="effective_from") from exc
    async with request.app.state.runtime.uow() as uow:
        store = PriceStore(uow.conn)
        try:
            (await store.price_list()).with_entry(entry, now=datetime.now(UTC))
        except RetroactivePriceError as exc:
            raise Unprocessable(
                "a price change may not take effect in the past", field="effective_from"
            ) from exc
        if not await store.add(entry):
            raise Conflict(
                "a price with this id, or for this resource at this instant, exists", field="price_id"
            )
        await uow.commit()
    return body.model_dump(mode="json")


class BudgetIn(BaseModel):
    """A project's monthly budget."""

    model_config = ConfigDict(extra="forbid")

    limit_micro: int = Field(gt=0, description="Monthly limit, micro-currency.")
    thresholds: list[int] = Field(default=list(DEFAULT_THRESHOLDS), min_length=1, max_length=10)
    hard_stop: bool = Field(default=False, description="At 100% ask the scheduler to refuse new work.")
    tenant_id: str | None = Field(default=None, description="Admins: the tenant to act for.")

    @field_validator("thresholds")
    @classmethod
    def _percentages(cls, value: list[int]) -> list[int]:
        if any(t <= 0 or t > 1000 for t in value):
            raise ValueError("thresholds are percentages between 1 and 1000")
        return sorted(set(value))


@router.get("/v1/budgets")
async def list_budgets(request: Request, caller: Caller, tenant_id: TenantQ = None) -> list[dict[str, Any]]:
    month = month_of(datetime.now(UTC))
    rows = await request.app.state.runtime.pool.fetch(SELECT_BUDGETS, tenant_filter(caller, tenant_id), month)
    return [{**dict(r), "month": month} for r in rows]


@router.put("/v1/budgets/{project}")
async def put_budget(project: str, body: BudgetIn, request: Request, caller: Caller) -> dict[str, Any]:
    tenant = one_tenant(caller, body.tenant_id)
    await request.app.state.runtime.pool.execute(
        UPSERT_BUDGET, tenant, project, body.limit_micro, body.thresholds, body.hard_stop
    )
    return {"tenant_id": tenant, "project": project, **body.model_dump(exclude={"tenant_id"})}


@router.delete("/v1/budgets/{project}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_budget(
    project: str, request: Request, caller: Caller, tenant_id: TenantQ = None
) -> Response:
    tenant = one_tenant(caller, tenant_id)
    if not await request.app.state.runtime.pool.fetchval(DELETE_BUDGET, tenant, project):
        raise NotFound(f"no budget for project {project!r}", field="project")
    return Response(status_code=status.HTTP_204_NO_CONTENT)


class TagPolicyIn(BaseModel):
    """Tag keys every workload of the tenant must carry."""

    model_config = ConfigDict(extra="forbid")

    required: list[str] = Field(max_length=50)
    tenant_id: str | None = None

    @field_validator("required")
    @classmethod
    def _keys(cls, value: list[str]) -> list[str]:
        if any(not k.strip() or len(k) > 100 for k in value):
            raise ValueError("tag keys must be non-empty and at most 100 characters")
        return value


class TenantTagsIn(BaseModel):
    """Default tags applied to every workload of the tenant (a workload's own tags win)."""

    model_config = ConfigDict(extra="forbid")

    tags: dict[str, str] = Field(max_length=50)
    tenant_id: str | None = None


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
    rows = await request.app.state.runtime.pool.fetch(SELECT_VIOLATIONS, tenant_filter(caller, tenant_id))
    return [dict(r) for r in rows]


@router.get("/v1/idle/actions")
async def list_idle_actions(
    request: Request, caller: Caller, tenant_id: TenantQ = None
) -> list[dict[str, Any]]:
    rows = await request.app.state.runtime.pool.fetch(SELECT_IDLE_ACTIONS, tenant_filter(caller, tenant_id))
    return [dict(r) for r in rows]


@router.get("/v1/spot-advice")
async def spot_advice(request: Request, caller: Caller, tenant_id: TenantQ = None) -> dict[str, Any]:
    tenant = one_tenant(caller, tenant_id)
    now = datetime.now(UTC)
    since = now - timedelta(days=_settings(request).spot_window_days)
    async with request.app.state.runtime.uow() as uow:
        prices = await PriceStore(uow.conn).price_list()
        usages = await views.spot_usages(uow.conn, tenant_id=tenant, since=since)
    report = spot_report(tenant_id=tenant, usages=usages, prices=prices, at=now)
    return {
        "tenant_id": tenant,
        "window_days": _settings(request).spot_window_days,
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


@router.get("/v1/usage/decayed")
async def get_decayed_usage(request: Request, caller: Caller, tenant_id: TenantQ = None) -> dict[str, Any]:
    half_life = timedelta(hours=_settings(request).usage_half_life_h)
    usage = await views.decayed_usage(
        request.app.state.runtime.pool,
        now=datetime.now(UTC),
        half_life=half_life,
        tenant_id=tenant_filter(caller, tenant_id),
    )
    return {
        "half_life_hours": _settings(request).usage_half_life_h,
        "tenants": {k: str(v) for k, v in usage.items()},
    }


@router.post("/v1/admin/usage/publish")
async def publish_usage(request: Request, _: Admin) -> dict[str, int]:
    half_life = timedelta(hours=_settings(request).usage_half_life_h)
    count = await publish_decayed_usage(request.app.state.runtime, now=datetime.now(UTC), half_life=half_life)
    return {"published": count}


@router.post("/v1/admin/accrual")
async def run_accrual(request: Request, _: Admin) -> dict[str, int]:
    config = metering_config(_settings(request))
    return {"rated": await accrue_all(request.app.state.runtime, now=datetime.now(UTC), config=config)}


@router.get("/v1/admin/reconciliation")
async def reconciliation(request: Request, _: Admin) -> dict[str, Any]:
    async with (
        request.app.state.runtime.pool.acquire() as conn,
        conn.transaction(isolation="repeatable_read"),
    ):
        result = await reconcile_ledger(
            conn, now=datetime.now(UTC), interval=_settings(request).rating_interval
        )
    return {
        "equal": result.equal,
        "differences": [_diff(d) for d in result.differences],
        "missing_keys": list(result.missing_keys[:100]),
        "unexpected_keys": list(result.unexpected_keys[:100]),
    }


def _diff(d: Any) -> dict[str, Any]:
    return {
        "tenant_id": d.tenant_id,
        "project": d.project,
        "expected_micro": d.expected_micro,
        "ledger_micro": d.ledger_micro,
    }
