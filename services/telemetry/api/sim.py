"""The admin's simulator controls: commands the agents of a simulated fleet play."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Request, status

from libs.common.auth import Admin
from libs.common.events.agent import SimFaultRequestedV1, WorkloadProfileSetV1
from libs.common.http import NotFound
from libs.common.http.errors import error_responses
from services.telemetry.api.schemas import CommandAccepted, FaultRequest, ProfileRequest
from services.telemetry.api.views import context

__all__ = ["router"]

router = APIRouter(tags=["live"])


@router.post(
    "/v1/admin/sim/faults",
    status_code=status.HTTP_202_ACCEPTED,
    summary="Inject a simulated fault",
    responses=error_responses(404),
)
async def inject_fault(body: FaultRequest, request: Request, _: Admin) -> CommandAccepted:
    runtime, _state, live = context(request)
    if not await live.some([body.gpu_uuid]):
        raise NotFound(f"no agent has reported GPU {body.gpu_uuid!r}", field="gpu_uuid")
    command = SimFaultRequestedV1(
        command_id=str(uuid.uuid4()),
        gpu_uuid=body.gpu_uuid,
        fault=body.fault,
        xid=body.xid,
        leak_pct_per_min=body.leak_pct_per_min,
    )
    async with runtime.uow() as uow:
        event_id = await uow.emit(command)
        await uow.commit()
    return CommandAccepted(command_id=command.command_id, event_id=event_id)


@router.post(
    "/v1/admin/sim/profiles",
    status_code=status.HTTP_202_ACCEPTED,
    summary="Set a simulated workload's profile",
    responses=error_responses(404),
)
async def set_profile(body: ProfileRequest, request: Request, _: Admin) -> CommandAccepted:
    runtime, state, _live = context(request)
    if body.workload_id not in state.view.by_workload:
        raise NotFound(f"no running workload {body.workload_id!r}", field="workload_id")
    command = WorkloadProfileSetV1(
        command_id=str(uuid.uuid4()), workload_id=body.workload_id, profile=body.profile
    )
    async with runtime.uow() as uow:
        event_id = await uow.emit(command)
        await uow.commit()
    return CommandAccepted(command_id=command.command_id, event_id=event_id)
