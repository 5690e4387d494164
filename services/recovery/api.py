"""The recovery API: incidents (tenant-scoped), SLO statistics and the fault catalog."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, Query, Request

from libs.common.auth import Caller, tenant_filter
from libs.common.http import NotFound, Unprocessable
from services.recovery.catalog import FaultCatalog, FaultEntry
from services.recovery.incidents import IncidentState
from services.recovery.slo import by_fault_type, summarize
from services.recovery.store import IncidentFilter, IncidentStore
from services.recovery.views import CatalogOut, IncidentDetail, IncidentSummary, SloOut, detail, summary

__all__ = ["parse_period", "router"]

router = APIRouter(tags=["recovery"])

_PERIOD = re.compile(r"^(\d{1,6})([mhd])$")
_UNIT = {"m": "minutes", "h": "hours", "d": "days"}
MAX_PERIOD = timedelta(days=366)


def parse_period(text: str) -> timedelta:
    """'90m', '24h', '7d' as a duration; Unprocessable naming ``period`` otherwise."""
    match = _PERIOD.match(text)
    if match is None:
        raise Unprocessable("period must look like 30m, 24h or 7d", field="period")
    period = timedelta(**{_UNIT[match.group(2)]: int(match.group(1))})
    if not timedelta(0) < period <= MAX_PERIOD:
        raise Unprocessable("period must be between 1 minute and 366 days", field="period")
    return period


def _catalog(request: Request) -> FaultCatalog:
    catalog: FaultCatalog = request.app.state.catalog
    return catalog


def _known_fault_type(request: Request, fault_type: str | None) -> str | None:
    if fault_type is not None and fault_type not in _catalog(request).entries:
        raise Unprocessable(f"unknown fault type {fault_type!r}; see /v1/catalog/faults", field="fault_type")
    return fault_type


@router.get("/v1/incidents")
async def list_incidents(
    request: Request,
    caller: Caller,
    state: IncidentState | None = None,
    node: Annotated[str | None, Query(min_length=1, max_length=253)] = None,
    gpu: Annotated[str | None, Query(min_length=1, max_length=128)] = None,
    fault_type: str | None = None,
    tenant_id: str | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> list[IncidentSummary]:
    flt = IncidentFilter(
        state=state.value if state else None,
        node=node,
        gpu=gpu,
        fault_type=_known_fault_type(request, fault_type),
        tenant=tenant_filter(caller, tenant_id),
    )
    async with request.app.state.runtime.pool.acquire() as conn:
        incidents = await IncidentStore(conn).search(flt, limit=limit, offset=offset)
    return [summary(i) for i in incidents]


@router.get("/v1/incidents/{incident_id}")
async def get_incident(request: Request, caller: Caller, incident_id: str) -> IncidentDetail:
    tenant = tenant_filter(caller)
    async with request.app.state.runtime.pool.acquire() as conn:
        store = IncidentStore(conn)
        found = await store.get(incident_id)
        # Another tenant's incident is reported as missing, so ids reveal nothing.
        if found is None or (tenant is not None and tenant not in found[1]):
            raise NotFound(f"no incident {incident_id!r}", field="incident_id")
        workload_tenants = await store.workload_tenants(incident_id)
    return detail(found[0], workload_tenants=workload_tenants, tenant=tenant)


@router.get("/v1/stats/slo")
async def slo_stats(
    request: Request, caller: Caller, period: str = "24h", fault_type: str | None = None
) -> SloOut:
    since = datetime.now(UTC) - parse_period(period)
    fault_type = _known_fault_type(request, fault_type)
    async with request.app.state.runtime.pool.acquire() as conn:
        incidents = await IncidentStore(conn).for_slo(
            since=since, fault_type=fault_type, tenant=tenant_filter(caller)
        )
    return SloOut(
        since=since,
        period=period,
        fault_type=fault_type,
        overall=summarize(incidents),
        by_fault_type=dict(by_fault_type(incidents)),
    )


@router.get("/v1/catalog/faults")
async def list_faults(request: Request, _: Caller) -> CatalogOut:
    catalog = _catalog(request)
    return CatalogOut(sources=dict(catalog.sources), faults=list(catalog.entries.values()))


@router.get("/v1/catalog/faults/{key}")
async def get_fault(request: Request, _: Caller, key: str) -> FaultEntry:
    entry = _catalog(request).entries.get(key)
    if entry is None:
        raise NotFound(f"no fault type {key!r} in the catalog", field="key")
    return entry
