"""Alertmanager's API v2 where on-call tools expect it: `amtool silence add/query/expire`, `alert query`.

Silences and alerts are the service's own (no second store), scoped to the caller's tenant. Bad input is a
400 whose body is a JSON string, as Alertmanager answers.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import yaml
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from libs.common.auth import Caller, Principal
from services.alerting.adapters.alert_queries import AlertOut, active_alerts
from services.alerting.adapters.config_store import ConfigStore
from services.alerting.api.alertmanager_v2_schemas import (
    AlertmanagerConfig,
    AlertmanagerStatus,
    AlertStatusV2,
    ClusterStatus,
    GettableAlert,
    GettableSilence,
    PostableSilence,
    ReceiverReference,
    SilenceCreated,
    VersionInfo,
    gettable_silence,
    matcher_from_v2,
)
from services.alerting.domain.alerts import Alert
from services.alerting.domain.inhibition import (
    DEFAULT_INHIBIT_RULES,
    InhibitRule,
    inhibited_by,
    to_alertmanager,
)
from services.alerting.domain.matchers import Matcher, check_pattern, matches_all
from services.alerting.domain.routing import RoutingTree, route_alert
from services.alerting.domain.silences import (
    Silence,
    confine_to_tenant,
    parse_matcher_list,
    silence_matches_filter,
)
from services.alerting.service.unit_of_work import alerting_uow

__all__ = ["router"]

router = APIRouter(prefix="/api/v2", tags=["alertmanager-v2"])
_TRUE = frozenset({"1", "t", "T", "true", "TRUE", "True"})
_FALSE = frozenset({"0", "f", "F", "false", "FALSE", "False"})
#: Alertmanager's resolve_timeout: a firing alert's `endsAt` is this far ahead until it resolves.
RESOLVE_TIMEOUT = timedelta(minutes=5)
MAX_ALERTS = 10_000


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """Alertmanager's error answers: a JSON string naming the problem (400 bad input, 404 no such silence)."""
    described = {400: "Bad request: the string names the problem.", 404: "No such silence (for this caller)."}
    return {
        status: {
            "description": described[status],
            "content": {"application/json": {"schema": {"type": "string"}}},
        }
        for status in statuses
    }


class _BadInput(ValueError):
    """Input Alertmanager would refuse with a 400."""


def _bad(error: Exception) -> JSONResponse:
    if isinstance(error, ValidationError):
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        message = str(first["msg"]).removeprefix("Value error, ")
        return JSONResponse(status_code=400, content=f"{where}: {message}" if where else message)
    return JSONResponse(status_code=400, content=str(error))


def _not_found() -> JSONResponse:
    return JSONResponse(status_code=404, content="silence not found")


def _owner(caller: Principal) -> str | None:
    return None if caller.is_admin else caller.tenant_id


class _Settings(Protocol):
    """What these routes read of the service's settings (the wiring passes AlertingSettings)."""

    @property
    def service_name(self) -> str: ...

    @property
    def default_receiver(self) -> str: ...


def _settings(request: Request) -> _Settings:
    settings: _Settings = request.app.state.runtime.settings
    return settings


def _filters(request: Request) -> tuple[Matcher, ...]:
    try:
        return tuple(m for text in request.query_params.getlist("filter") for m in parse_matcher_list(text))
    except ValueError as error:
        raise _BadInput(f"filter: {error}") from None


def _flag(request: Request, name: str) -> bool:
    """Go's strconv.ParseBool, as Alertmanager reads its query flags (all default to true)."""
    value = request.query_params.get(name, "true")
    if value not in _TRUE | _FALSE:
        raise _BadInput(f"{name}: {value!r} is not a boolean")
    return value in _TRUE


@router.get("/status", response_model=AlertmanagerStatus)
async def get_status(request: Request, caller: Caller) -> Any:
    owner = _owner(caller)
    async with request.app.state.runtime.pool.acquire() as conn:
        store = ConfigStore(conn)
        tree = await store.tree(default_receiver=_settings(request).default_receiver)
        stored = await store.inhibit_rules(owner=owner)
    rules = stored if stored is not None else (DEFAULT_INHIBIT_RULES if owner is None else ())
    config: dict[str, Any] = {"inhibit_rules": [to_alertmanager(r) for r in rules]}
    if caller.is_admin:  # receivers are the admins' business, as on /v1/receivers
        routes = [{"receiver": r.receiver} for r in tree.routes]
        config = {"route": {"receiver": tree.default.receiver, "routes": routes}, **config}
    return AlertmanagerStatus(
        cluster=ClusterStatus(),
        version_info=VersionInfo(version=f"gpucloud-{_settings(request).service_name}"),
        config=AlertmanagerConfig(original=yaml.safe_dump(config, sort_keys=False)),
        uptime=request.app.state.started_at,
    )


@router.get("/silences", response_model=list[GettableSilence], responses=_errors(400))
async def get_silences(request: Request, caller: Caller) -> Any:
    try:
        filters = _filters(request)
    except _BadInput as error:
        return _bad(error)
    now = datetime.now(UTC)
    async with request.app.state.runtime.pool.acquire() as conn:
        silences = await ConfigStore(conn).silences(tenant=_owner(caller), active_at=None)
    return [gettable_silence(s, now=now) for s in silences if silence_matches_filter(s, filters)]


async def _visible(store: ConfigStore, caller: Principal, silence_id: str) -> Silence | None:
    found = await store.silence(silence_id)
    if found is None or not (caller.is_admin or found[1] == caller.tenant_id):
        return None
    return found[0]


def _silence_of(body: PostableSilence, caller: Principal, now: datetime) -> Silence:
    matchers = confine_to_tenant((matcher_from_v2(m) for m in body.matchers), _owner(caller))
    if body.ends_at <= now:
        raise _BadInput("endsAt: the silence would already have ended")
    return Silence(
        id=str(uuid.uuid4()),
        matchers=matchers,
        starts_at=max(body.starts_at, now),
        ends_at=body.ends_at,
        created_by=body.created_by or caller.key_id,
        comment=body.comment,
    )


@router.post(
    "/silences", response_model=SilenceCreated, response_model_by_alias=True, responses=_errors(400, 404)
)
async def post_silences(request: Request, caller: Caller) -> Any:
    now = datetime.now(UTC)
    try:
        body = PostableSilence.model_validate_json(await request.body())
        silence = _silence_of(body, caller, now)
    except ValueError as error:
        return _bad(error)
    async with alerting_uow(request.app.state.runtime) as uow:
        store = uow.config
        if body.id is not None:
            if await _visible(store, caller, body.id) is None:
                return _not_found()
            # As Alertmanager does when a silence cannot be changed in place: the old one ends now.
            await store.expire_silence(body.id, now=now)
        await store.add_silence(silence, owner=_owner(caller))
        await store.bump()
        await uow.commit()
    return SilenceCreated(silence_id=silence.id)


@router.get("/silence/{silence_id}", response_model=GettableSilence, responses=_errors(404))
async def get_silence(silence_id: str, request: Request, caller: Caller) -> Any:
    async with request.app.state.runtime.pool.acquire() as conn:
        silence = await _visible(ConfigStore(conn), caller, silence_id)
    return _not_found() if silence is None else gettable_silence(silence, now=datetime.now(UTC))


@router.delete("/silence/{silence_id}", responses=_errors(404))
async def delete_silence(silence_id: str, request: Request, caller: Caller) -> Any:
    async with alerting_uow(request.app.state.runtime) as uow:
        store = uow.config
        if await _visible(store, caller, silence_id) is None:
            return _not_found()
        await store.expire_silence(silence_id, now=datetime.now(UTC))
        await store.bump()
        await uow.commit()
    return None


def _gettable(
    alert: AlertOut,
    *,
    silences: Sequence[Silence],
    rules: Sequence[InhibitRule],
    firing: Sequence[Alert],
    tree: RoutingTree,
    now: datetime,
) -> GettableAlert:
    silenced = [s.id for s in silences if s.mutes(alert.labels, now)]
    inhibited = inhibited_by(rules, alert.labels, firing=firing)
    receivers = sorted({route.receiver for route in route_alert(tree, alert.labels)})
    return GettableAlert(
        labels=alert.labels,
        annotations=alert.annotations,
        receivers=[ReceiverReference(name=r) for r in receivers],
        fingerprint=alert.fingerprint,
        starts_at=alert.starts_at,
        updated_at=now,
        ends_at=alert.ends_at or now + RESOLVE_TIMEOUT,
        status=AlertStatusV2(
            state="suppressed" if silenced or inhibited else "active",
            silenced_by=silenced,
            inhibited_by=inhibited,
        ),
    )


def _pattern(text: str) -> re.Pattern[str]:
    check_pattern(text)
    return re.compile(text)


def _alert_filter(request: Request) -> Callable[[GettableAlert], bool]:
    """The predicate of `GET /api/v2/alerts`'s query: filter, receiver, active, silenced, inhibited."""
    filters, receiver = _filters(request), request.query_params.get("receiver")
    active, silenced, inhibited = (_flag(request, n) for n in ("active", "silenced", "inhibited"))
    _flag(request, "unprocessed")  # every alert here has been processed; the flag is only checked
    try:
        pattern = None if receiver is None else _pattern(receiver)
    except ValueError as error:
        raise _BadInput(f"receiver: {error}") from None

    def keep(alert: GettableAlert) -> bool:
        return (
            matches_all(filters, alert.labels)
            and (pattern is None or any(pattern.fullmatch(r.name) for r in alert.receivers))
            and (active or alert.status.state != "active")
            and (silenced or not alert.status.silenced_by)
            and (inhibited or not alert.status.inhibited_by)
        )

    return keep


@router.get(
    "/alerts", response_model=list[GettableAlert], response_model_exclude_none=True, responses=_errors(400)
)
async def get_alerts(request: Request, caller: Caller) -> Any:
    try:
        keep = _alert_filter(request)
    except _BadInput as error:
        return _bad(error)
    now = datetime.now(UTC)
    async with request.app.state.runtime.pool.acquire() as conn:
        store = ConfigStore(conn)
        # Any firing alert may inhibit, and any silence may mute, the caller's alerts: read them all.
        everyone = await active_alerts(conn, tenant=None, limit=MAX_ALERTS)
        silences = await store.silences(tenant=None, active_at=now)
        rules = await store.all_inhibit_rules()
        tree = await store.tree(default_receiver=_settings(request).default_receiver)
    firing = [_firing(a) for a in everyone]
    owner = _owner(caller)
    shown = (
        _gettable(a, silences=silences, rules=rules, firing=firing, tree=tree, now=now)
        for a in everyone
        if owner is None or a.tenant == owner
    )
    return [g for g in shown if keep(g)]


def _firing(alert: AlertOut) -> Alert:
    return Alert(
        fingerprint=alert.fingerprint, labels=alert.labels, annotations={}, starts_at=alert.starts_at
    )
