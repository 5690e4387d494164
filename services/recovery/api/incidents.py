"""The incident routes (tenant-scoped): the list and one incident in full."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request

from libs.common.auth import Caller, tenant_filter
from libs.common.http import NotFound, Offset
from libs.common.http.errors import error_responses
from services.recovery.adapters.incident_queries import IncidentFilter, IncidentQueries
from services.recovery.api.catalog import known_fault_type
from services.recovery.api.schemas import IncidentDetail, IncidentSummary, detail, summary
from services.recovery.domain.incidents import IncidentState

__all__ = ["router"]

router = APIRouter(tags=["recovery"])


@router.get("/v1/incidents", responses=error_responses(403))
async def list_incidents(
    request: Request,
    caller: Caller,
    state: IncidentState | None = None,
    node: Annotated[str | None, Query(min_length=1, max_length=253)] = None,
    gpu: Annotated[str | None, Query(min_length=1, max_length=128)] = None,
    fault_type: str | None = None,
    tenant_id: str | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    offset: Offset = 0,
) -> list[IncidentSummary]:
    flt = IncidentFilter(
        state=state.value if state else None,
        node=node,
        gpu=gpu,
        fault_type=known_fault_type(request, fault_type),
        tenant=tenant_filter(caller, tenant_id),
    )
    async with request.app.state.runtime.pool.acquire() as conn:
        queries = IncidentQueries(conn)
        incidents = await queries.search(flt, limit=limit, offset=offset)
        # A tenant's progress counts only its own workloads' migrations, as in the detail.
        mine = tenant_filter(caller)
        tenants = await queries.workload_tenants_of([i.id for i in incidents]) if mine else {}
    return [summary(i, workload_tenants=tenants.get(i.id), tenant=mine) for i in incidents]


@router.get("/v1/incidents/{incident_id}", responses=error_responses(404))
async def get_incident(request: Request, caller: Caller, incident_id: str) -> IncidentDetail:
    tenant = tenant_filter(caller)
    async with request.app.state.runtime.pool.acquire() as conn:
        queries = IncidentQueries(conn)
        found = await queries.get(incident_id)
        # Another tenant's incident is reported as missing, so ids reveal nothing.
        if found is None or (tenant is not None and tenant not in found[1]):
            raise NotFound(f"no incident {incident_id!r}", field="incident_id")
        workload_tenants = await queries.workload_tenants(incident_id)
    return detail(found[0], workload_tenants=workload_tenants, tenant=tenant)
