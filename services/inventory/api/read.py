"""Read API (any valid key): nodes, GPUs, partitions, capacity and the model catalog."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request

from libs.common.auth import Caller, tenant_filter
from libs.common.http import NotFound, Offset, Unprocessable
from libs.common.http.errors import error_responses
from services.inventory.adapters.inventory_queries import (
    GROUPINGS,
    capacity,
    gpu_detail,
    list_gpus,
    list_nodes,
    list_partitions,
)
from services.inventory.api.schemas import CapacityOut, GpuDetail, GpuOut, NodeOut, PartitionOut
from services.inventory.domain.catalog import GpuModel
from services.inventory.domain.errors import UnknownModelError
from services.inventory.domain.mig import profile_combinations
from services.inventory.domain.units import gpu_units, mig_profile_units
from services.inventory.service.operations import UnitContext

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["inventory"])

Health = Literal["healthy", "degraded", "draining", "failed"]
Limit = Annotated[int, Query(ge=1, le=10_000, description="Page size.")]
DEFAULT_GROUPS = "pool,zone,node,model"


def _units(request: Request) -> UnitContext:
    units: UnitContext = request.app.state.units
    return units


def _canonical_model(request: Request, model: str | None, *, field: str = "model") -> str | None:
    if model is None:
        return None
    try:
        return _units(request).catalog.get(model).name
    except UnknownModelError as error:
        raise Unprocessable(str(error), field=field) from error


def _group_by(text: str) -> list[str]:
    groups = [g.strip() for g in text.split(",") if g.strip()]
    if unknown := [g for g in groups if g not in GROUPINGS]:
        known = ", ".join(GROUPINGS)
        raise Unprocessable(f"unknown grouping {', '.join(unknown)}; known: {known}", field="group_by")
    return list(dict.fromkeys(groups))


@router.get("/nodes", summary="List nodes")
async def get_nodes(
    request: Request,
    _: Caller,
    pool: str | None = None,
    zone: str | None = None,
    limit: Limit = 1000,
    offset: Offset = 0,
) -> list[NodeOut]:
    async with request.app.state.runtime.pool.acquire() as conn:
        return await list_nodes(conn, filters={"pool": pool, "zone": zone}, limit=limit, offset=offset)


@router.get("/gpus", summary="List GPUs, filtered by node, model, pool, zone or health")
async def get_gpus(
    request: Request,
    _: Caller,
    node: str | None = None,
    model: str | None = None,
    pool: str | None = None,
    zone: str | None = None,
    health: Health | None = None,
    limit: Limit = 1000,
    offset: Offset = 0,
) -> list[GpuOut]:
    filters = {
        "node": node,
        "model": _canonical_model(request, model),
        "pool": pool,
        "zone": zone,
        "health": health,
    }
    async with request.app.state.runtime.pool.acquire() as conn:
        return await list_gpus(conn, filters=filters, limit=limit, offset=offset)


@router.get(
    "/gpus/{uuid}",
    summary="One GPU: partitions, allocations, capacity, health history",
    responses=error_responses(404),
)
async def get_gpu(uuid: str, request: Request, caller: Caller) -> GpuDetail:
    async with request.app.state.runtime.pool.acquire() as conn:
        detail = await gpu_detail(conn, gpu_uuid=uuid, tenant=tenant_filter(caller))
    if detail is None:
        raise NotFound(f"no GPU {uuid!r}", field="uuid")
    return detail


@router.get("/partitions", summary="List MIG instances and time-sliced shares")
async def get_partitions(
    request: Request,
    _: Caller,
    gpu: str | None = None,
    node: str | None = None,
    model: str | None = None,
    pool: str | None = None,
    zone: str | None = None,
    limit: Limit = 1000,
    offset: Offset = 0,
) -> list[PartitionOut]:
    filters = {
        "gpu": gpu,
        "node": node,
        "model": _canonical_model(request, model),
        "pool": pool,
        "zone": zone,
    }
    async with request.app.state.runtime.pool.acquire() as conn:
        return await list_partitions(conn, filters=filters, limit=limit, offset=offset)


@router.get("/capacity", summary="Capacity summary: total / allocated / free and fragmentation")
async def get_capacity(
    request: Request,
    _: Caller,
    pool: str | None = None,
    zone: str | None = None,
    node: str | None = None,
    model: str | None = None,
    group_by: Annotated[
        str, Query(description=f"Comma list of {', '.join(GROUPINGS)}; gpu gives one entry per GPU.")
    ] = DEFAULT_GROUPS,
) -> CapacityOut:
    filters = {"pool": pool, "zone": zone, "node": node, "model": _canonical_model(request, model)}
    groups = _group_by(group_by)
    async with request.app.state.runtime.pool.acquire() as conn:
        return await capacity(conn, filters=filters, group_by=groups)


def _model_out(model: GpuModel, units: UnitContext, *, layouts: bool) -> dict[str, Any]:
    catalog, basis = units.catalog, units.basis
    out: dict[str, Any] = model.model_dump(mode="json", exclude={"mig_profiles"})
    out["source_url"] = catalog.sources[model.source]
    out["units"] = str(gpu_units(model=model.name, catalog=catalog, basis=basis))
    out["mig_profiles"] = [
        {
            **p.model_dump(mode="json"),
            "units": str(mig_profile_units(model=model.name, profile=p.name, catalog=catalog, basis=basis)),
        }
        for p in model.mig_profiles
    ]
    if layouts and model.mig_supported:
        out["mig_layouts"] = sorted(list(c) for c in profile_combinations(model=model))
    return out


@router.get("/catalog", summary="Every GPU model with its compute units and MIG profiles")
async def get_catalog(request: Request, _: Caller) -> dict[str, Any]:
    units = _units(request)
    return {
        "version": units.catalog.version,
        "unit_basis": units.basis.model_dump(mode="json"),
        "models": [_model_out(m, units, layouts=False) for m in units.catalog.models],
    }


@router.get(
    "/catalog/{model}",
    summary="One GPU model, with every MIG profile combination that fits",
    responses=error_responses(404),
)
async def get_catalog_model(model: str, request: Request, _: Caller) -> dict[str, Any]:
    units = _units(request)
    try:
        spec = units.catalog.get(model)
    except UnknownModelError as error:
        raise NotFound(str(error), field="model") from error
    return _model_out(spec, units, layouts=True)
