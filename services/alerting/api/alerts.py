"""Alerts and silences API: firing and pending alerts and history (tenant-scoped), silences CRUD."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request, status
from pydantic import ValidationError

from libs.common.auth import Caller, Principal, tenant_filter
from libs.common.http import NotFound
from libs.common.http.errors import error_responses
from libs.common.runtime import ServiceRuntime
from services.alerting.adapters.alert_queries import AlertOut, active_alerts, alert_history, pending_alerts
from services.alerting.adapters.config_store import ConfigStore
from services.alerting.api.errors import confined, domain_error
from services.alerting.api.schemas import SilenceIn, SilenceOut
from services.alerting.domain.silences import Silence
from services.alerting.service.unit_of_work import alerting_uow

__all__ = ["router"]

router = APIRouter(tags=["alerts"])
Limit = Annotated[int, Query(ge=1, le=1000)]


def _runtime(request: Request) -> ServiceRuntime:
    runtime: ServiceRuntime = request.app.state.runtime
    return runtime


AlertState = Annotated[
    Literal["firing", "pending", "all"],
    Query(description="firing (the default), pending (condition holding, `for` not yet elapsed), or both."),
]


@router.get("/v1/alerts", responses=error_responses(403))
async def list_alerts(
    request: Request,
    caller: Caller,
    tenant: str | None = None,
    state: AlertState = "firing",
    limit: Limit = 500,
) -> list[AlertOut]:
    scope = tenant_filter(caller, tenant)
    async with _runtime(request).pool.acquire() as conn:
        firing = await active_alerts(conn, tenant=scope, limit=limit) if state != "pending" else []
        pending = await pending_alerts(conn, tenant=scope, limit=limit) if state != "firing" else []
    if state == "firing":
        return firing
    if state == "pending":
        return pending
    return sorted([*firing, *pending], key=lambda a: a.starts_at, reverse=True)[:limit]


@router.get("/v1/alerts/history", responses=error_responses(403))
async def history(
    request: Request,
    caller: Caller,
    tenant: str | None = None,
    fingerprint: str | None = None,
    rule: str | None = None,
    limit: Limit = 100,
) -> list[AlertOut]:
    async with _runtime(request).pool.acquire() as conn:
        return await alert_history(
            conn, tenant=tenant_filter(caller, tenant), fingerprint=fingerprint, rule=rule, limit=limit
        )


def _silence_out(silence: Silence, owner: str | None, now: datetime) -> SilenceOut:
    return SilenceOut(
        **silence.model_dump(exclude={"matchers"}),
        matchers=list(silence.matchers),
        owner_tenant=owner,
        active=silence.active(now),
    )


@router.post("/v1/silences", status_code=status.HTTP_201_CREATED, tags=["silences"])
async def create_silence(body: SilenceIn, request: Request, caller: Caller) -> SilenceOut:
    now = datetime.now(UTC)
    try:
        silence = Silence(
            id=str(uuid.uuid4()),
            matchers=confined(caller, body.matchers),
            starts_at=body.starts_at or now,
            ends_at=body.ends_at,
            created_by=caller.key_id,
            comment=body.comment,
        )
    except ValidationError as exc:
        raise domain_error(exc) from None
    async with alerting_uow(_runtime(request)) as uow:
        store = uow.config
        await store.add_silence(silence, owner=None if caller.is_admin else caller.tenant_id)
        await store.bump()
        await uow.commit()
    return _silence_out(silence, None if caller.is_admin else caller.tenant_id, now)


@router.get("/v1/silences", tags=["silences"])
async def list_silences(request: Request, caller: Caller, include_expired: bool = False) -> list[SilenceOut]:
    now = datetime.now(UTC)
    owner = None if caller.is_admin else caller.tenant_id
    async with _runtime(request).pool.acquire() as conn:
        silences = await ConfigStore(conn).silences(tenant=owner, active_at=None if include_expired else now)
    return [_silence_out(s, owner, now) for s in silences]


async def _visible_silence(
    store: ConfigStore, caller: Principal, silence_id: str
) -> tuple[Silence, str | None]:
    found = await store.silence(silence_id)
    if found is None or not (caller.is_admin or found[1] == caller.tenant_id):
        raise NotFound(f"no silence {silence_id!r}", field="silence_id")
    return found


@router.get("/v1/silences/{silence_id}", tags=["silences"], responses=error_responses(404))
async def get_silence(silence_id: str, request: Request, caller: Caller) -> SilenceOut:
    async with _runtime(request).pool.acquire() as conn:
        silence, owner = await _visible_silence(ConfigStore(conn), caller, silence_id)
    return _silence_out(silence, owner, datetime.now(UTC))


@router.delete(
    "/v1/silences/{silence_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    tags=["silences"],
    responses=error_responses(404),
)
async def expire_silence(silence_id: str, request: Request, caller: Caller) -> None:
    async with alerting_uow(_runtime(request)) as uow:
        store = uow.config
        await _visible_silence(store, caller, silence_id)
        await store.expire_silence(silence_id, now=datetime.now(UTC))
        await store.bump()
        await uow.commit()
