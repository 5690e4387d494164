"""Receivers (secrets never returned), the routing tree, test notifications and the delivery log."""

from __future__ import annotations

import secrets
import uuid
from datetime import UTC, datetime
from typing import Annotated, Any, Protocol
from urllib.parse import urlsplit

from fastapi import APIRouter, Query, Request, status

from libs.common.auth import Admin, Caller, tenant_filter
from libs.common.http import Conflict, NotFound, Unprocessable
from libs.common.http.errors import error_responses
from libs.common.runtime import ServiceRuntime
from services.alerting.adapters.config_store import ConfigStore, Receiver
from services.alerting.adapters.delivery_store import DeliveryStore
from services.alerting.api.schemas import ReceiverIn, ReceiverOut, ReceiverUpdate, RoutingTreeIn
from services.alerting.domain.alerts import Alert, fingerprint
from services.alerting.domain.grouping import Notification
from services.alerting.domain.routing import RoutingTree
from services.alerting.service.unit_of_work import alerting_uow

__all__ = ["router"]

router = APIRouter(tags=["delivery"])
Limit = Annotated[int, Query(ge=1, le=1000)]


def _runtime(request: Request) -> ServiceRuntime:
    runtime: ServiceRuntime = request.app.state.runtime
    return runtime


class _Settings(Protocol):
    """What these routes read of the service's settings (the wiring passes AlertingSettings)."""

    @property
    def pagerduty_url(self) -> str: ...

    @property
    def default_receiver(self) -> str: ...


def _settings(request: Request) -> _Settings:
    settings: _Settings = request.app.state.runtime.settings
    return settings


def _url(kind: str, url: str | None, settings: _Settings) -> str:
    chosen = url or (settings.pagerduty_url if kind == "pagerduty" else None)
    if chosen is None:
        raise Unprocessable(f"a {kind} receiver needs a url", field="url")
    parts = urlsplit(chosen)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise Unprocessable("url must be an absolute http(s) URL", field="url")
    return chosen


def _out(receiver: Receiver, *, signing_secret: str | None = None) -> ReceiverOut:
    parts = urlsplit(receiver.url)
    # A Slack incoming-webhook URL is a bearer secret: show only where it points.
    url = f"{parts.scheme}://{parts.netloc}/…" if receiver.kind == "slack" else receiver.url
    return ReceiverOut(
        name=receiver.name,
        kind=receiver.kind,
        url=url,
        has_routing_key=bool(receiver.routing_key),
        created_at=receiver.created_at,
        signing_secret=signing_secret,
    )


@router.post(
    "/v1/receivers", status_code=status.HTTP_201_CREATED, tags=["receivers"], responses=error_responses(409)
)
async def create_receiver(body: ReceiverIn, request: Request, _: Admin) -> ReceiverOut:
    url = _url(body.kind, body.url, _settings(request))
    if body.kind == "pagerduty" and not body.routing_key:
        raise Unprocessable("a pagerduty receiver needs a routing_key", field="routing_key")
    generated = None if body.secret else secrets.token_urlsafe(32)
    secret = body.secret or generated or ""
    async with alerting_uow(_runtime(request)) as uow:
        store = uow.config
        if not await store.add_receiver(
            name=body.name, kind=body.kind, url=url, secret=secret, routing_key=body.routing_key
        ):
            raise Conflict(f"a receiver named {body.name!r} exists", field="name")
        await store.bump()
        receiver = await store.receiver(body.name)
        await uow.commit()
    assert receiver is not None
    return _out(receiver, signing_secret=generated)


@router.get("/v1/receivers", tags=["receivers"])
async def list_receivers(request: Request, _: Admin) -> list[ReceiverOut]:
    async with _runtime(request).pool.acquire() as conn:
        return [_out(r) for r in await ConfigStore(conn).receivers()]


@router.get("/v1/receivers/{name}", tags=["receivers"], responses=error_responses(404))
async def get_receiver(name: str, request: Request, _: Admin) -> ReceiverOut:
    async with _runtime(request).pool.acquire() as conn:
        receiver = await ConfigStore(conn).receiver(name)
    if receiver is None:
        raise NotFound(f"no receiver {name!r}", field="name")
    return _out(receiver)


@router.put("/v1/receivers/{name}", tags=["receivers"], responses=error_responses(404))
async def update_receiver(name: str, body: ReceiverUpdate, request: Request, _: Admin) -> ReceiverOut:
    url = _url(body.kind, body.url, _settings(request))
    async with alerting_uow(_runtime(request)) as uow:
        store = uow.config
        if not await store.update_receiver(
            name=name, kind=body.kind, url=url, secret=body.secret, routing_key=body.routing_key
        ):
            raise NotFound(f"no receiver {name!r}", field="name")
        await store.bump()
        receiver = await store.receiver(name)
        await uow.commit()
    assert receiver is not None
    return _out(receiver)


@router.delete(
    "/v1/receivers/{name}",
    status_code=status.HTTP_204_NO_CONTENT,
    tags=["receivers"],
    responses=error_responses(404),
)
async def delete_receiver(name: str, request: Request, _: Admin) -> None:
    async with alerting_uow(_runtime(request)) as uow:
        store = uow.config
        if not await store.delete_receiver(name):
            raise NotFound(f"no receiver {name!r}", field="name")
        await store.bump()
        await uow.commit()


@router.post(
    "/v1/receivers/{name}/test",
    status_code=status.HTTP_202_ACCEPTED,
    tags=["receivers"],
    responses=error_responses(404),
)
async def send_test_notification(name: str, request: Request, _: Admin) -> dict[str, str]:
    now = datetime.now(UTC)
    labels = {"alertname": "TestNotification", "severity": "info", "receiver": name}
    alert = Alert(
        fingerprint=fingerprint(labels),
        labels=labels,
        annotations={"summary": "Test notification from gpucloud alerting"},
        starts_at=now,
    )
    notification = Notification(
        id=f"test-{uuid.uuid4()}",
        receiver=name,
        group_key='{}:{alertname="TestNotification"}',
        group_labels={"alertname": "TestNotification"},
        alerts=(alert,),
        created_at=now,
    )
    async with alerting_uow(_runtime(request)) as uow:
        if await uow.config.receiver(name) is None:
            raise NotFound(f"no receiver {name!r}", field="name")
        await uow.deliveries.add_test(notification)
        await uow.commit()
    request.app.state.delivery.wake()
    return {"notification_id": notification.id}


@router.get("/v1/routes", tags=["routes"])
async def get_routes(request: Request, _: Admin) -> RoutingTree:
    async with _runtime(request).pool.acquire() as conn:
        return await ConfigStore(conn).tree(default_receiver=_settings(request).default_receiver)


@router.put("/v1/routes", tags=["routes"])
async def put_routes(body: RoutingTreeIn, request: Request, _: Admin) -> RoutingTree:
    async with alerting_uow(_runtime(request)) as uow:
        store = uow.config
        known = {r.name for r in await store.receivers()}
        # The default route may keep naming the configured default receiver before it is created (the
        # tree GET answers on a fresh install): its notifications wait for it, as docs/alerting.md says.
        placeholder = {_settings(request).default_receiver}
        for field, route in (
            ("default", body.default),
            *((f"routes.{i}", r) for i, r in enumerate(body.routes)),
        ):
            if route.receiver not in known and not (field == "default" and route.receiver in placeholder):
                raise Unprocessable(f"no receiver {route.receiver!r}", field=f"{field}.receiver")
        await store.set_tree(body)
        await store.bump()
        await uow.commit()
    return body


@router.get("/v1/deliveries", tags=["deliveries"], responses=error_responses(403))
async def deliveries(
    request: Request,
    caller: Caller,
    fingerprint: str | None = None,
    notification_id: str | None = None,
    tenant: str | None = None,
    limit: Limit = 100,
) -> list[dict[str, Any]]:
    async with _runtime(request).pool.acquire() as conn:
        return await DeliveryStore(conn).notifications(
            tenant=tenant_filter(caller, tenant),
            fingerprint=fingerprint,
            notification_id=notification_id,
            limit=limit,
        )


@router.get("/v1/deliveries/dead", tags=["deliveries"], responses=error_responses(403))
async def dead_deliveries(
    request: Request, caller: Caller, tenant: str | None = None, limit: Limit = 100
) -> list[dict[str, Any]]:
    async with _runtime(request).pool.acquire() as conn:
        return await DeliveryStore(conn).dead_letters(tenant=tenant_filter(caller, tenant), limit=limit)
