"""Inhibition rules as configuration: the global set and each tenant's, as JSON or Alertmanager YAML."""

from __future__ import annotations

import asyncio
import re
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from pydantic import Field, ValidationError

from libs.common.auth import Caller, Principal, tenant_filter
from libs.common.http import Unprocessable
from libs.common.http.errors import error_responses
from libs.common.yaml_safe import load
from services.alerting.adapters.config_store import ConfigStore
from services.alerting.adapters.rulefile_yaml import to_yaml
from services.alerting.api.errors import domain_error
from services.alerting.api.schemas import _refusing_unknown_fields
from services.alerting.domain.inhibition import (
    DEFAULT_INHIBIT_RULES,
    MAX_INHIBIT_RULES,
    InhibitRule,
    confine_rule,
    inhibit_rules_from_config,
    to_alertmanager,
)
from services.alerting.service.unit_of_work import alerting_uow

__all__ = ["router"]

router = APIRouter(prefix="/v1/inhibit-rules", tags=["inhibition"])
InhibitRuleIn = Annotated[InhibitRule, _refusing_unknown_fields(InhibitRule)]
InhibitRulesIn = Annotated[list[InhibitRuleIn], Field(max_length=MAX_INHIBIT_RULES)]
Tenant = Annotated[
    str | None, Query(max_length=200, description="Admins: that tenant's set (omitted: global).")
]

_PATH_RE = re.compile(r"[a-z_]+(\.\w+)*")
_YAML_BODY = {
    "requestBody": {
        "required": True,
        "description": "Alertmanager's `inhibit_rules:` (source_matchers, target_matchers, equal) in YAML.",
        "content": {
            "application/yaml": {"schema": {"type": "string"}},
            "text/plain": {"schema": {"type": "string"}},
        },
    }
}


def _field_of(error: ValueError) -> str:
    """The path a domain message starts with (`inhibit_rules.0: ...`), or "" when it names none."""
    head = str(error).partition(":")[0]
    return head if _PATH_RE.fullmatch(head) else ""


def _owner(caller: Principal, tenant: str | None) -> str | None:
    return tenant_filter(caller, tenant)


def _confined(rules: tuple[InhibitRule, ...], owner: str | None) -> tuple[InhibitRule, ...]:
    if owner is None:
        return rules
    confined = []
    for i, rule in enumerate(rules):
        try:
            confined.append(confine_rule(rule, owner))
        except ValueError as error:
            raise Unprocessable(str(error), field=f"{i}.{_field_of(error)}") from None
    return tuple(confined)


async def _read(request: Request, owner: str | None) -> tuple[InhibitRule, ...]:
    async with request.app.state.runtime.pool.acquire() as conn:
        stored = await ConfigStore(conn).inhibit_rules(owner=owner)
    return stored if stored is not None else (DEFAULT_INHIBIT_RULES if owner is None else ())


async def _replace(request: Request, rules: tuple[InhibitRule, ...], owner: str | None) -> list[InhibitRule]:
    confined = _confined(rules, owner)
    async with alerting_uow(request.app.state.runtime) as uow:
        await uow.config.put_inhibit_rules(confined, owner=owner)
        await uow.config.bump()
        await uow.commit()
    return list(confined)


@router.get("", responses=error_responses(403))
async def get_inhibit_rules(request: Request, caller: Caller, tenant: Tenant = None) -> list[InhibitRule]:
    return list(await _read(request, _owner(caller, tenant)))


@router.put("", responses=error_responses(403, 422))
async def put_inhibit_rules(
    body: InhibitRulesIn, request: Request, caller: Caller, tenant: Tenant = None
) -> list[InhibitRule]:
    return await _replace(request, tuple(body), _owner(caller, tenant))


_FILE_SCHEMA = {
    "type": "object",
    "description": "Alertmanager's configuration, of which only inhibit_rules is read or written here.",
    "properties": {"inhibit_rules": {"type": "array", "items": {"type": "object"}}},
}


@router.get(
    "/file",
    response_class=Response,
    responses={
        200: {
            "description": "The rules as Alertmanager's `inhibit_rules:` YAML.",
            "content": {"application/yaml": {"schema": _FILE_SCHEMA}},
        },
        **error_responses(403),
    },
)
async def export_inhibit_rules(request: Request, caller: Caller, tenant: Tenant = None) -> Response:
    rules = await _read(request, _owner(caller, tenant))
    document: dict[str, Any] = {"inhibit_rules": [to_alertmanager(r) for r in rules]}
    return Response(to_yaml(document), media_type="application/yaml")


@router.put("/file", responses=error_responses(403, 422), openapi_extra=_YAML_BODY)
async def import_inhibit_rules(request: Request, caller: Caller, tenant: Tenant = None) -> list[InhibitRule]:
    owner = _owner(caller, tenant)
    text = (await request.body()).decode("utf-8", errors="replace")
    try:
        rules = await asyncio.to_thread(lambda: inhibit_rules_from_config(load(text)))
    except ValidationError as error:
        raise domain_error(error) from None
    except ValueError as error:
        raise Unprocessable(str(error), field=_field_of(error) or "body") from None
    return await _replace(request, rules, owner)
