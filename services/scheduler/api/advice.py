"""Advice routes: GET /v1/recommendations/gpu and GET /v1/predictions/duration."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request

from libs.common.auth import Caller, tenant_filter
from libs.common.http.errors import Unprocessable, error_responses
from services.scheduler.adapters.fleet_store import FleetStore
from services.scheduler.adapters.workload_store import WorkloadStore
from services.scheduler.api.access import ctx_of
from services.scheduler.domain.advice import HistoryJob, ModelFacts, memory_need_gb, predict, recommend
from services.scheduler.service.context import SchedulerContext

__all__ = ["router"]

router = APIRouter(tags=["advice"])
_GIB = 1024**3


async def _fleet(ctx: SchedulerContext) -> dict[str, ModelFacts]:
    facts: dict[str, ModelFacts] = {}
    for r in await FleetStore(ctx.runtime.pool).gpus():
        old = facts.get(r.model)
        healthy = (old.healthy if old else 0) + (r.health == "healthy")
        mem = max(round(int(r.memory_bytes) / _GIB), old.memory_gb if old else 0)
        facts[r.model] = ModelFacts(r.model, mem, float(r.units), healthy)
    return facts


async def _history(ctx: SchedulerContext, tenant: str) -> list[HistoryJob]:
    jobs = []
    for r in await WorkloadStore(ctx.runtime.pool).history(tenant):
        image = ctx.catalog.images.get(r.spec["image"]["name"])
        jobs.append(
            HistoryJob(
                model=(r.models or ["?"])[0],
                gpus=max(int(r.gpus), 1),
                framework=image.framework if image else "?",
                duration_s=(r.ended_at - r.started_at).total_seconds(),
            )
        )
    return jobs


def _framework(ctx: SchedulerContext, name: str | None) -> str | None:
    if name is None:
        return None
    for image in ctx.catalog.images.values():
        if name.lower() in (image.name, image.framework.lower()):
            return image.framework
    raise Unprocessable(f"unknown framework {name!r}", field="framework")


@router.get("/v1/recommendations/gpu", responses=error_responses(403))
async def recommend_gpu(
    request: Request,
    caller: Caller,
    framework: str | None = None,
    model_size_b: Annotated[float | None, Query(gt=0, le=10_000, description="Parameters, billions")] = None,
    memory_gb: Annotated[float | None, Query(gt=0, le=100_000)] = None,
    mode: Literal["training", "inference"] = "training",
    deadline_h: Annotated[float | None, Query(gt=0, le=10_000)] = None,
    tenant_id: str | None = None,
) -> dict[str, Any]:
    ctx = ctx_of(request)
    tenant = tenant_filter(caller, tenant_id)
    fleet = await _fleet(ctx)
    history = await _history(ctx, tenant) if tenant else []
    need = memory_need_gb(model_size_b=model_size_b, memory_gb=memory_gb, mode=mode)
    rec = recommend(
        fleet=fleet,
        need_gb=need,
        framework=_framework(ctx, framework),
        deadline_h=deadline_h,
        history=history,
        min_samples=ctx.settings.history_min_samples,
    )
    return {
        "model": rec.model,
        "count": rec.count,
        "memory_need_gb": round(need, 1),
        "reasons": rec.reasons,
        "similar_jobs": rec.similar_jobs,
        "history_too_thin": rec.history_too_thin,
        "expected_duration_s": rec.expected_duration_s,
        "fleet_gpus": sum(f.healthy for f in fleet.values()),
    }


@router.get("/v1/predictions/duration", responses=error_responses(403))
async def predict_duration(
    request: Request,
    caller: Caller,
    framework: str | None = None,
    model: str | None = None,
    tenant_id: str | None = None,
) -> dict[str, Any]:
    ctx = ctx_of(request)
    tenant = tenant_filter(caller, tenant_id)
    if tenant is None:
        raise Unprocessable("an admin must say whose history to use", field="tenant_id")
    p = predict(
        history=await _history(ctx, tenant),
        framework=_framework(ctx, framework),
        model=model,
        min_samples=ctx.settings.history_min_samples,
    )
    return {
        "p50_s": p.p50_s,
        "p90_s": p.p90_s,
        "samples": p.samples,
        "history_too_thin": p.history_too_thin,
        "reasons": p.reasons,
    }
