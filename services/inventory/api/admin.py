"""Admin API: drain/undrain, MIG layout, time-slicing and fleet files. Every change emits its event."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Request

from libs.common.auth import Admin
from libs.common.http import BadRequest, Unprocessable
from libs.common.http.errors import error_responses
from services.inventory.adapters.fleet_yaml import FLEET_LIMITS, parse_fleet_async
from services.inventory.adapters.inventory_queries import gpu_detail
from services.inventory.api.errors import domain_errors
from services.inventory.api.schemas import (
    FleetResult,
    GpuDetail,
    HealthChange,
    MigLayout,
    TimeSlicing,
    TimeSlicingResult,
)
from services.inventory.domain.errors import FleetFileError
from services.inventory.domain.health import HealthAction
from services.inventory.domain.mig import MigRequest
from services.inventory.service.operations import (
    UnitContext,
    change_health,
    register,
    repartition_mig,
    repartition_time_slice,
)
from services.inventory.service.unit_of_work import inventory_uow

__all__ = ["FLEET_PATH", "router"]

router = APIRouter(prefix="/v1/admin", tags=["inventory admin"])
_FLEET = "/fleet"
#: Where a fleet file is posted: the one inventory path allowed a body over max_request_bytes.
FLEET_PATH = router.prefix + _FLEET

FLEET_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "text/plain")
MAX_FLEET_BYTES = FLEET_LIMITS.max_bytes
#: The fleet file's body, as the OpenAPI document shows it (the route reads and checks it itself).
_FLEET_BODY = {
    "requestBody": {
        "required": True,
        "description": f"A fleet file: nodes and their GPUs, in YAML (at most {MAX_FLEET_BYTES} bytes).",
        "content": {media: {"schema": {"type": "string"}} for media in FLEET_TYPES},
    }
}


def _mig_requests(profiles: list[str]) -> list[MigRequest]:
    requests = []
    for n, text in enumerate(profiles):
        profile, _, start = text.partition("@")
        if (start and not start.isdigit()) or (start and int(start) > 7) or not profile.strip():
            raise Unprocessable(
                f"{text!r} is not 'profile' or 'profile@slot' (slot 0-7)", field=f"profiles.{n}"
            )
        requests.append(MigRequest(profile=profile.strip(), start=int(start) if start else None))
    return requests


async def _detail(request: Request, uuid: str) -> GpuDetail:
    async with request.app.state.runtime.pool.acquire() as conn:
        detail = await gpu_detail(conn, gpu_uuid=uuid, tenant=None)
    assert detail is not None
    return detail


async def _health(request: Request, uuid: str, action: HealthAction, reason: str) -> GpuDetail:
    async with inventory_uow(request.app.state.runtime) as uow:
        with domain_errors(field="health"):
            await change_health(
                uow=uow, gpu_uuid=uuid, action=action, reason=reason, at=datetime.now(UTC), source="admin"
            )
        await uow.commit()
    return await _detail(request, uuid)


@router.post(
    "/gpus/{uuid}/drain",
    summary="Take a GPU out of service (no new work)",
    responses=error_responses(404, 409),
)
async def drain(uuid: str, body: HealthChange, request: Request, _: Admin) -> GpuDetail:
    return await _health(request, uuid, HealthAction.DRAIN, body.reason)


@router.post(
    "/gpus/{uuid}/undrain", summary="Put a drained GPU back into service", responses=error_responses(404, 409)
)
async def undrain(uuid: str, body: HealthChange, request: Request, _: Admin) -> GpuDetail:
    return await _health(request, uuid, HealthAction.UNDRAIN, body.reason)


@router.put(
    "/gpus/{uuid}/mig",
    summary="Set an idle GPU's MIG layout ([] turns MIG off)",
    responses=error_responses(404, 409),
)
async def set_mig(uuid: str, body: MigLayout, request: Request, _: Admin) -> GpuDetail:
    requests = _mig_requests(body.profiles)
    units: UnitContext = request.app.state.units
    async with inventory_uow(request.app.state.runtime) as uow:
        with domain_errors(field="profiles"):
            await repartition_mig(
                uow=uow, gpu_uuid=uuid, requests=requests, units=units, at=datetime.now(UTC)
            )
        await uow.commit()
    return await _detail(request, uuid)


@router.put(
    "/gpus/{uuid}/time-slicing",
    summary="Share an idle GPU between workloads (1 = not shared)",
    responses=error_responses(404, 409),
)
async def set_time_slicing(uuid: str, body: TimeSlicing, request: Request, _: Admin) -> TimeSlicingResult:
    async with inventory_uow(request.app.state.runtime) as uow:
        with domain_errors(field="ratio"):
            gpu = await repartition_time_slice(
                uow=uow,
                gpu_uuid=uuid,
                ratio=body.ratio,
                workload_kind=body.workload_kind,
                at=datetime.now(UTC),
            )
        await uow.commit()
    detail = await _detail(request, uuid)
    warnings = list(gpu.time_slice.warnings) if gpu.time_slice else []
    return TimeSlicingResult(gpu=detail, partitions=detail.partitions, warnings=warnings)


async def _fleet_text(request: Request) -> str:
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type not in FLEET_TYPES:
        raise Unprocessable(
            f"send the fleet file as one of {', '.join(FLEET_TYPES)}, not {content_type or 'nothing'}",
            field="content-type",
        )
    raw = await request.body()
    if len(raw) > MAX_FLEET_BYTES:
        raise BadRequest(f"fleet file larger than {MAX_FLEET_BYTES} bytes", field="body")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise Unprocessable("fleet file is not UTF-8", field="body") from error


@router.post(
    _FLEET,
    summary="Register or update the nodes and GPUs of a fleet file (YAML body)",
    responses=error_responses(400, 422),
    openapi_extra=_FLEET_BODY,
)
async def post_fleet(request: Request, _: Admin) -> FleetResult:
    text = await _fleet_text(request)
    units: UnitContext = request.app.state.units
    try:
        discoveries = await parse_fleet_async(text=text, catalog=units.catalog)
    except FleetFileError as error:
        raise Unprocessable(str(error), field="body") from error
    async with inventory_uow(request.app.state.runtime) as uow:
        result = await register(
            uow=uow, discoveries=discoveries, units=units, at=datetime.now(UTC), source="fleet-file"
        )
        await uow.commit()
    return FleetResult(
        nodes=result.nodes,
        nodes_changed=result.nodes_changed,
        gpus=result.gpus,
        gpus_changed=result.gpus_changed,
        events=result.events,
    )
