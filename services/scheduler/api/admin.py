"""Admin API: every tenant's queue, tenant shares and quotas."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Request

from libs.common.auth import Admin
from libs.common.http.errors import NotFound, error_responses
from services.scheduler.adapters.fleet_store import FleetStore
from services.scheduler.adapters.workload_store import WorkloadStore
from services.scheduler.api.access import ctx_of
from services.scheduler.api.schemas import QueueEntryOut, QuotaIn, QuotaOut, ShareIn, ShareOut
from services.scheduler.domain.quota import QuotaLimits, to_milli
from services.scheduler.domain.rows import limits_of
from services.scheduler.service.pass_inputs import load_book

__all__ = ["router"]

router = APIRouter(prefix="/v1/admin", tags=["admin"])


@router.get("/queues")
async def all_queues(request: Request, _: Admin) -> dict[str, object]:
    ctx = ctx_of(request)
    rows = await WorkloadStore(ctx.runtime.pool).queue(tenant=None)
    by_tenant: dict[str, list[QueueEntryOut]] = {}
    for r in rows:
        entry = QueueEntryOut.model_validate(r, from_attributes=True)
        by_tenant.setdefault(r.tenant_id, []).append(entry)
    return {"placer_here": ctx.is_leader, "waiting": len(rows), "tenants": by_tenant}


async def _require_tenant(fleet: FleetStore, tenant_id: str) -> None:
    if not await fleet.tenant_exists(tenant_id):
        raise NotFound(f"no tenant {tenant_id!r}", field="tenant_id")


async def _share(request: Request, tenant_id: str) -> ShareOut:
    ctx = ctx_of(request)
    book = await load_book(ctx.runtime.pool, ctx, now=datetime.now(UTC))
    e = book.explain(tenant=tenant_id, urgency=0.0)
    total = max(book.total_shares(), book.shares_of(tenant_id))
    return ShareOut(
        tenant_id=tenant_id,
        shares=book.shares_of(tenant_id),
        total_shares=total,
        share_fraction=book.shares_of(tenant_id) / total,
        decayed_usage_unit_hours=e.decayed_usage,
        entitlement_unit_hours=e.entitlement,
        fair_share=e.fair_share,
    )


@router.get("/tenants/{tenant_id}/share", responses=error_responses(404))
async def get_share(tenant_id: str, request: Request, _: Admin) -> ShareOut:
    await _require_tenant(FleetStore(ctx_of(request).runtime.pool), tenant_id)
    return await _share(request, tenant_id)


@router.put("/tenants/{tenant_id}/share", responses=error_responses(404))
async def put_share(tenant_id: str, body: ShareIn, request: Request, _: Admin) -> ShareOut:
    ctx = ctx_of(request)
    async with ctx.uow() as uow:
        fleet = uow.fleet
        await _require_tenant(fleet, tenant_id)
        await fleet.set_shares(tenant_id, shares=body.shares)
        await uow.workloads.wake_placer()
        await uow.commit()
    return await _share(request, tenant_id)


async def _quota(request: Request, tenant_id: str) -> QuotaOut:
    ctx = ctx_of(request)
    row = await FleetStore(ctx.runtime.pool).quota(tenant_id)
    limits = limits_of(row) if row else QuotaLimits()
    usage = await ctx.quotas.usage(tenant=tenant_id)
    units = limits.units_milli / 1000 if limits.units_milli is not None else None
    return QuotaOut(
        tenant_id=tenant_id,
        limits=QuotaIn(gpus=limits.gpus, units=units, workloads=limits.workloads),
        usage={"gpus": usage.gpus, "units": usage.units_milli / 1000, "workloads": usage.workloads},
    )


@router.get("/tenants/{tenant_id}/quota", responses=error_responses(404))
async def get_quota(tenant_id: str, request: Request, _: Admin) -> QuotaOut:
    await _require_tenant(FleetStore(ctx_of(request).runtime.pool), tenant_id)
    return await _quota(request, tenant_id)


@router.put("/tenants/{tenant_id}/quota", responses=error_responses(404))
async def put_quota(tenant_id: str, body: QuotaIn, request: Request, _: Admin) -> QuotaOut:
    ctx = ctx_of(request)
    units = to_milli(body.units) if body.units is not None else None
    async with ctx.uow() as uow:
        fleet = uow.fleet
        await _require_tenant(fleet, tenant_id)
        await fleet.set_quota(tenant_id, gpus=body.gpus, units_milli=units, workloads=body.workloads)
        await uow.workloads.wake_placer()
        await uow.commit()
    # Postgres is the record; Redis follows (and a rebuild would restore it from Postgres anyway).
    await ctx.quotas.set_limits(
        tenant=tenant_id, limits=QuotaLimits(gpus=body.gpus, units_milli=units, workloads=body.workloads)
    )
    return await _quota(request, tenant_id)
