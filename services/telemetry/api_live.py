"""Server-Sent Events of live samples, and the admin's simulator controls."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, status
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, model_validator

from libs.common.auth import Admin, Caller
from libs.common.events.agent import SimFault, SimFaultRequestedV1, SimProfile, WorkloadProfileSetV1
from libs.common.http import NotFound
from services.telemetry.sim import SIMULATED_XIDS
from services.telemetry.views import context, visible_latest

__all__ = ["router"]

router = APIRouter(tags=["live"])


@router.get(
    "/v1/stream",
    summary="Live samples as Server-Sent Events (one 'samples' event per refresh)",
    response_class=StreamingResponse,
)
async def stream(
    request: Request,
    caller: Caller,
    node: Annotated[str | None, Query(description="Only this node.")] = None,
    gpu: Annotated[str | None, Query(description="Only this GPU.")] = None,
    tenant: Annotated[str | None, Query(description="Admin: only this tenant's GPUs.")] = None,
    max_events: Annotated[int | None, Query(ge=1, description="Close after this many events.")] = None,
) -> StreamingResponse:
    _, state, _ = context(request)
    await visible_latest(request, caller, requested_tenant=tenant)  # refuses a foreign tenant up front

    async def events() -> AsyncIterator[str]:
        sent = 0
        while max_events is None or sent < max_events:
            rows = await visible_latest(request, caller, requested_tenant=tenant)
            chosen = [r for r in rows if _matches(r, node=node, gpu=gpu)]
            yield f"event: samples\ndata: {json.dumps({'samples': chosen})}\n\n"
            sent += 1
            if await request.is_disconnected():
                return
            await asyncio.sleep(state.settings.stream_refresh_s)

    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(events(), media_type="text/event-stream", headers=headers)


def _matches(row: dict[str, Any], *, node: str | None, gpu: str | None) -> bool:
    return (node is None or row.get("node") == node) and (gpu is None or row.get("gpu") == gpu)


class FaultRequest(BaseModel):
    """Inject a fault into a simulated GPU."""

    model_config = ConfigDict(extra="forbid")
    gpu_uuid: str = Field(min_length=1, description="GPU to break.")
    fault: SimFault = Field(description="What to inject.")
    xid: int | None = Field(
        default=None, description=f"With fault=xid: one of {SIMULATED_XIDS} (default 79)."
    )

    @model_validator(mode="after")
    def _xid_fits(self) -> FaultRequest:
        if self.xid is not None and self.fault != "xid":
            raise ValueError("xid is only for fault 'xid'")
        if self.xid is not None and self.xid not in SIMULATED_XIDS:
            raise ValueError(f"xid must be one of {SIMULATED_XIDS}")
        return self


class ProfileRequest(BaseModel):
    """Change how a simulated workload uses its GPUs."""

    model_config = ConfigDict(extra="forbid")
    workload_id: str = Field(min_length=1, description="Workload to change.")
    profile: SimProfile = Field(description="training, inference or interactive.")


class CommandAccepted(BaseModel):
    """The command was published for the agents."""

    command_id: str = Field(description="Id of the command event.")
    event_id: str = Field(description="Id of its envelope.")


@router.post("/v1/admin/sim/faults", status_code=status.HTTP_202_ACCEPTED, summary="Inject a simulated fault")
async def inject_fault(body: FaultRequest, request: Request, _: Admin) -> CommandAccepted:
    runtime, _state, live = context(request)
    if not await live.some([body.gpu_uuid]):
        raise NotFound(f"no agent has reported GPU {body.gpu_uuid!r}", field="gpu_uuid")
    command = SimFaultRequestedV1(
        command_id=str(uuid.uuid4()), gpu_uuid=body.gpu_uuid, fault=body.fault, xid=body.xid
    )
    async with runtime.uow() as uow:
        event_id = await uow.emit(command)
        await uow.commit()
    return CommandAccepted(command_id=command.command_id, event_id=event_id)


@router.post(
    "/v1/admin/sim/profiles",
    status_code=status.HTTP_202_ACCEPTED,
    summary="Set a simulated workload's profile",
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
