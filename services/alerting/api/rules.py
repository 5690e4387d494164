"""Rules API: CRUD (admins: any rule; tenants: their own, confined to their series) and rule files."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response, status

from libs.common.auth import Caller, Principal
from libs.common.http import Conflict, Forbidden, NotFound, Unprocessable
from libs.common.runtime import ServiceRuntime
from services.alerting.adapters.config_store import ConfigStore
from services.alerting.adapters.rulefile_yaml import parse_rule_file, to_yaml
from services.alerting.api.schemas import RuleIn, RuleOut, rule_from, rule_out
from services.alerting.domain.promrules import export_rules
from services.alerting.domain.rules import Rule

__all__ = ["router"]

router = APIRouter(prefix="/v1/rules", tags=["rules"])


def _runtime(request: Request) -> ServiceRuntime:
    runtime: ServiceRuntime = request.app.state.runtime
    return runtime


def _owner(caller: Principal, body: RuleIn) -> str | None:
    """Tenants own what they create; their rules may only narrow to their own tenant."""
    if caller.is_admin:
        return body.owner_tenant
    if body.owner_tenant not in (None, caller.tenant_id):
        raise Forbidden("a tenant key creates rules only for its own tenant", field="owner_tenant")
    for i, m in enumerate(body.matchers):
        if m.name == "tenant" and not (m.op.value == "=" and m.value == caller.tenant_id):
            raise Unprocessable(
                f"a tenant rule is confined to tenant {caller.tenant_id!r}", field=f"matchers.{i}"
            )
    return caller.tenant_id


def _may_change(caller: Principal, rule: Rule | None, name: str) -> Rule:
    if rule is None or not (caller.is_admin or rule.owner_tenant in (None, caller.tenant_id)):
        raise NotFound(f"no rule {name!r}", field="name")
    if not caller.is_admin and rule.owner_tenant != caller.tenant_id:
        raise Forbidden("global rules are managed by admins", field="name")
    return rule


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


@router.post("", status_code=status.HTTP_201_CREATED)
async def create_rule(body: RuleIn, request: Request, caller: Caller) -> RuleOut:
    rule = rule_from(body, owner=_owner(caller, body))
    async with _runtime(request).uow() as uow:
        store = ConfigStore(uow.conn)
        if not await store.add_rule(rule):
            raise Conflict(f"a rule named {rule.name!r} exists", field="name")
        await store.bump()
        await uow.commit()
    return rule_out(rule)


@router.get("/export")
async def export(request: Request, caller: Caller) -> Response:
    async with _runtime(request).pool.acquire() as conn:
        store = ConfigStore(conn)
        rules = await (store.rules(tenant=None) if caller.is_admin else store.rules(tenant=caller.tenant_id))
    return Response(to_yaml(export_rules(rules)), media_type="application/yaml")


@router.post("/import")
async def import_rules(request: Request, caller: Caller) -> dict[str, list[str]]:
    text = (await request.body()).decode("utf-8", errors="replace")
    try:
        parsed = parse_rule_file(text)
    except (ValueError, TypeError, KeyError) as exc:
        raise Unprocessable(f"not a rule file this service reads: {exc}", field="body") from None
    rules = [
        r if caller.is_admin else r.model_copy(update={"owner_tenant": caller.tenant_id}) for r in parsed
    ]
    async with _runtime(request).uow() as uow:
        store = ConfigStore(uow.conn)
        for rule in rules:
            existing = await store.rule(rule.name)
            if existing is not None and not caller.is_admin and existing.owner_tenant != caller.tenant_id:
                raise Conflict(f"a rule named {rule.name!r} exists", field="name")
            await store.put_rule(rule)
        await store.bump()
        await uow.commit()
    return {"imported": [r.name for r in rules]}


@router.get("/{name}")
async def get_rule(name: str, request: Request, caller: Caller) -> RuleOut:
    async with _runtime(request).pool.acquire() as conn:
        rule = await ConfigStore(conn).rule(name)
    if rule is None or not (caller.is_admin or rule.owner_tenant in (None, caller.tenant_id)):
        raise NotFound(f"no rule {name!r}", field="name")
    return rule_out(rule)


@router.put("/{name}")
async def replace_rule(name: str, body: RuleIn, request: Request, caller: Caller) -> RuleOut:
    if body.name != name:
        raise Unprocessable("the body's name must match the path", field="name")
    async with _runtime(request).uow() as uow:
        store = ConfigStore(uow.conn)
        _may_change(caller, await store.rule(name), name)
        rule = rule_from(body, owner=_owner(caller, body))
        await store.put_rule(rule)
        await store.bump()
        await uow.commit()
    return rule_out(rule)


@router.delete("/{name}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_rule(name: str, request: Request, caller: Caller) -> None:
    async with _runtime(request).uow() as uow:
        store = ConfigStore(uow.conn)
        _may_change(caller, await store.rule(name), name)
        await store.delete_rule(name)
        await store.bump()
        await uow.commit()
