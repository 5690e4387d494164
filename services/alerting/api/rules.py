"""Rules API: CRUD (admins: any rule; tenants: their own, confined to their series) and rule files."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response, status

from libs.common.auth import Caller, Principal
from libs.common.http import Conflict, Forbidden, NotFound, Unprocessable
from libs.common.http.errors import error_responses
from libs.common.runtime import ServiceRuntime
from services.alerting.adapters.config_store import ConfigStore
from services.alerting.adapters.rulefile_yaml import parse_rule_file_async, to_yaml
from services.alerting.api.errors import confined
from services.alerting.api.schemas import RuleIn, RuleOut, rule_from, rule_out
from services.alerting.domain.promrules import condition_key, export_rules, unmatched_labels
from services.alerting.domain.rules import DEFAULT_RULES, EvaluationMode, Rule
from services.alerting.service.unit_of_work import alerting_uow

__all__ = ["router"]

router = APIRouter(prefix="/v1/rules", tags=["rules"])
_SHIPPED = frozenset(r.name for r in DEFAULT_RULES)
OwnerTenant = Annotated[
    str | None,
    Query(
        max_length=200,
        description="Admins: whose rule of this name (omitted: the global one, or the only one there is).",
    ),
]


#: The import's body: a Prometheus rule file, read as text whatever its content type.
_RULE_FILE_BODY = {
    "requestBody": {
        "required": True,
        "description": "A Prometheus rule file (groups of alerting rules) in YAML.",
        "content": {
            "application/yaml": {"schema": {"type": "string"}},
            "text/plain": {"schema": {"type": "string"}},
        },
    }
}


def _runtime(request: Request) -> ServiceRuntime:
    runtime: ServiceRuntime = request.app.state.runtime
    return runtime


def _owner(caller: Principal, body: RuleIn) -> str | None:
    """Tenants own what they create; their rules may only narrow to their own tenant."""
    if caller.is_admin:
        return body.owner_tenant
    if body.owner_tenant not in (None, caller.tenant_id):
        raise Forbidden("a tenant key creates rules only for its own tenant", field="owner_tenant")
    confined(caller, body.matchers)  # the 422 of a matcher beyond the tenant; the owner confines the rest
    return caller.tenant_id


def _may_change(caller: Principal, rule: Rule | None, name: str) -> Rule:
    if rule is None or not (caller.is_admin or rule.owner_tenant in (None, caller.tenant_id)):
        raise NotFound(f"no rule {name!r}", field="name")
    if not caller.is_admin and rule.owner_tenant != caller.tenant_id:
        raise Forbidden("global rules are managed by admins", field="name")
    return rule


async def _find(store: ConfigStore, caller: Principal, name: str, owner: str | None) -> Rule | None:
    """The rule `name` as the caller sees it: a tenant's own, else a global one, never another tenant's."""
    named = await store.rules_named(name)  # the global one first
    if not caller.is_admin:
        if owner not in (None, caller.tenant_id):
            raise Forbidden("a tenant key reads only its own and the global rules", field="owner_tenant")
        visible = [r for r in named if r.owner_tenant == caller.tenant_id]
        visible += [r for r in named if r.owner_tenant is None]
        return visible[0] if visible else None
    if owner is not None:
        return next((r for r in named if r.owner_tenant == owner), None)
    if len(named) > 1 and named[0].owner_tenant is not None:
        owners = ", ".join(repr(r.owner_tenant) for r in named)
        raise Conflict(
            f"tenants {owners} each have a rule named {name!r}: say whose with owner_tenant",
            field="owner_tenant",
        )
    return named[0] if named else None


async def _name_free(store: ConfigStore, rule: Rule) -> None:
    """A tenant's rule names never repeat a global rule's (both would apply to its series by name)."""
    for other in await store.rules_named(rule.name, lock=True):
        if other.key != rule.key and None in (other.owner_tenant, rule.owner_tenant):
            whose = "global rule" if other.owner_tenant is None else f"rule of tenant {other.owner_tenant!r}"
            raise Conflict(f"a {whose} is named {rule.name!r}", field="name")


@router.get("")
async def list_rules(request: Request, caller: Caller) -> list[RuleOut]:
    async with _runtime(request).pool.acquire() as conn:
        store = ConfigStore(conn)
        rules = await (
            store.rules(tenant=None)
            if caller.is_admin
            else store.visible_rules(tenant=caller.tenant_id or "")
        )
    return [rule_out(r) for r in rules]


@router.post("", status_code=status.HTTP_201_CREATED, responses=error_responses(403, 409))
async def create_rule(body: RuleIn, request: Request, caller: Caller) -> RuleOut:
    rule = rule_from(body, owner=_owner(caller, body))
    async with alerting_uow(_runtime(request)) as uow:
        store = uow.config
        await _name_free(store, rule)
        if not await store.add_rule(rule):
            raise Conflict(f"a rule named {rule.name!r} exists", field="name")
        await store.bump()
        await uow.commit()
    return rule_out(rule)


#: The exported file's shape (schemathesis and clients read a YAML body as the document it holds).
_RULE_FILE_SCHEMA = {
    "type": "object",
    "required": ["groups"],
    "properties": {"groups": {"type": "array", "items": {"type": "object"}}},
}


@router.get(
    "/export",
    response_class=Response,
    responses={
        200: {
            "description": "The caller's rules as a Prometheus-style rule file.",
            "content": {"application/yaml": {"schema": _RULE_FILE_SCHEMA}},
        }
    },
)
async def export(request: Request, caller: Caller) -> Response:
    async with _runtime(request).pool.acquire() as conn:
        store = ConfigStore(conn)
        rules = await (store.rules(tenant=None) if caller.is_admin else store.rules(tenant=caller.tenant_id))
    return Response(to_yaml(export_rules(rules)), media_type="application/yaml")


Replace = Annotated[
    bool,
    Query(description="Replace rules of the same name (shipped ones too); without it such a name is a 409."),
]


async def _check_taken(store: ConfigStore, rule: Rule, *, replace: bool) -> bool:
    """Whether the import replaces a rule of this name; a 409 naming it unless the caller asked to."""
    await _name_free(store, rule)
    current = await store.rule(rule.name, owner=rule.owner_tenant)
    if current is None:
        return False
    if not replace:
        shipped = rule.owner_tenant is None and rule.name in _SHIPPED
        raise Conflict(
            f"a {'shipped ' if shipped else ''}rule named {rule.name!r} exists: "
            "rename the alert, or import with ?replace=true to replace it",
            field="name",
        )
    return True


def _same_conditions(rules: Sequence[Rule], stored: Sequence[Rule]) -> list[str]:
    """Warnings for rules that page on a condition another rule already pages on (Prometheus loads both)."""
    incoming = {r.key for r in rules}
    seen: dict[tuple[object, ...], str] = {}
    for other in stored:
        if other.key not in incoming:
            seen.setdefault(condition_key(other), other.name)
    warnings: list[str] = []
    for rule in rules:
        twin = seen.setdefault(condition_key(rule), rule.name)
        if twin != rule.name:
            warnings.append(f"alert {rule.name!r} has the same condition as {twin!r}: both will page")
    return warnings


Mode = Annotated[
    EvaluationMode | None,
    Query(
        description="Evaluate every group of the file so: `stream` (per sample) or `prometheus` (on the "
        "group's interval grid, any supported PromQL). Default: stream for a group whose rules all have "
        "a stream shape, else prometheus."
    ),
]


@router.post("/import", responses=error_responses(409, 422), openapi_extra=_RULE_FILE_BODY)
async def import_rules(
    request: Request, caller: Caller, replace: Replace = False, mode: Mode = None
) -> dict[str, list[str]]:
    text = (await request.body()).decode("utf-8", errors="replace")
    try:
        parsed = await parse_rule_file_async(text, mode=mode)
    except (ValueError, TypeError, KeyError) as exc:
        raise Unprocessable(f"not a rule file this service reads: {exc}", field="body") from None
    rules = [
        r if caller.is_admin else r.model_copy(update={"owner_tenant": caller.tenant_id}) for r in parsed
    ]
    async with alerting_uow(_runtime(request)) as uow:
        store = uow.config
        replaced = [r.name for r in rules if await _check_taken(store, r, replace=replace)]
        stored = await store.rules(tenant=None)
        warnings = [w for r in rules for w in unmatched_labels(r)]
        warnings += _same_conditions(rules, stored)
        for rule in rules:
            await store.put_rule(rule)
        await store.bump()
        await uow.commit()
    extra = {"replaced": replaced, "warnings": warnings}
    return {"imported": [r.name for r in rules], **{k: v for k, v in extra.items() if v}}


@router.get("/{name}", responses=error_responses(403, 404, 409))
async def get_rule(name: str, request: Request, caller: Caller, owner_tenant: OwnerTenant = None) -> RuleOut:
    async with _runtime(request).pool.acquire() as conn:
        rule = await _find(ConfigStore(conn), caller, name, owner_tenant)
    if rule is None:
        raise NotFound(f"no rule {name!r}", field="name")
    return rule_out(rule)


@router.put("/{name}", responses=error_responses(403, 404, 409))
async def replace_rule(
    name: str, body: RuleIn, request: Request, caller: Caller, owner_tenant: OwnerTenant = None
) -> RuleOut:
    if body.name != name:
        raise Unprocessable("the body's name must match the path", field="name")
    async with alerting_uow(_runtime(request)) as uow:
        store = uow.config
        existing = _may_change(caller, await _find(store, caller, name, owner_tenant), name)
        rule = rule_from(body, owner=_owner(caller, body))
        if rule.key == existing.key:
            await store.put_rule(rule)
        else:  # an admin giving the rule to another owner
            await store.delete_rule(name, owner=existing.owner_tenant)
            await _name_free(store, rule)
            if not await store.add_rule(rule):
                raise Conflict(
                    f"tenant {rule.owner_tenant!r} has a rule named {name!r}", field="owner_tenant"
                )
        await store.bump()
        await uow.commit()
    return rule_out(rule)


@router.delete("/{name}", status_code=status.HTTP_204_NO_CONTENT, responses=error_responses(403, 404, 409))
async def delete_rule(name: str, request: Request, caller: Caller, owner_tenant: OwnerTenant = None) -> None:
    async with alerting_uow(_runtime(request)) as uow:
        store = uow.config
        rule = _may_change(caller, await _find(store, caller, name, owner_tenant), name)
        await store.delete_rule(name, owner=rule.owner_tenant)
        await store.bump()
        await uow.commit()
