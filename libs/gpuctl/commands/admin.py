"""admin tenants/keys/quotas/shares: the fleet's tenants, their keys, limits and fair-share weights."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer
from rich.console import Group, RenderableType
from rich.text import Text

from libs.gpuctl.commands._options import usage
from libs.gpuctl.render import Column, Format, Output, emit, fields, table, when
from libs.gpuctl.session import session_of

__all__ = ["quota_view", "register", "tenants_view"]

app = typer.Typer(help="Tenants, keys, quotas and shares (admin key).", no_args_is_help=True)
tenants_app = typer.Typer(help="List and create tenants.", no_args_is_help=True)
keys_app = typer.Typer(help="Issue and revoke tenants' API keys.", no_args_is_help=True)
quotas_app = typer.Typer(help="Per-tenant limits on GPUs, units and workloads.", no_args_is_help=True)
shares_app = typer.Typer(help="Per-tenant fair-share weights.", no_args_is_help=True)
app.add_typer(tenants_app, name="tenants")
app.add_typer(keys_app, name="keys")
app.add_typer(quotas_app, name="quotas")
app.add_typer(shares_app, name="shares")
TenantId = Annotated[str, typer.Argument(help="The tenant (a lower-case slug).")]
UNLIMITED = "unlimited"


def register(root: typer.Typer) -> None:
    """Add the admin group."""
    root.add_typer(app, name="admin")


def tenants_view(rows: list[dict[str, Any]]) -> RenderableType:
    """One line per tenant."""
    columns = [
        Column("TENANT", lambda t: t["tenant_id"]),
        Column("NAME", lambda t: t["name"]),
        Column("CREATED", lambda t: when(t["created_at"])),
    ]
    return table(rows, columns)


@tenants_app.command("ls")
def tenants_ls(ctx: typer.Context, output: Output = Format.TABLE) -> None:
    """Every tenant."""
    emit(session_of(ctx).client().get("scheduler", "/v1/admin/tenants"), output, view=tenants_view)


def _key_view(key: dict[str, Any]) -> RenderableType:
    shown = fields([("Key id", key["key_id"]), ("Tenant", key["tenant_id"]), ("API key", key["api_key"])])
    return Group(shown, Text("The API key is shown once: store it now."))


@tenants_app.command("create")
def tenants_create(
    ctx: typer.Context,
    tenant_id: TenantId,
    name: Annotated[str | None, typer.Option(help="Display name (default: the id).")] = None,
    output: Output = Format.TABLE,
) -> None:
    """Create a tenant and its first API key (printed once)."""
    session = session_of(ctx)
    body = {"tenant_id": tenant_id, "name": name or tenant_id}
    created = session.client().post("scheduler", "/v1/admin/tenants", json=body)
    if session.quiet and output is Format.TABLE:
        sys.stdout.write(created["key"]["api_key"] + "\n")
        return
    emit(created, output, view=lambda c: _key_view(c["key"]))


@keys_app.command("issue")
def keys_issue(ctx: typer.Context, tenant_id: TenantId, output: Output = Format.TABLE) -> None:
    """Issue another key for a tenant (printed once)."""
    session = session_of(ctx)
    key = session.client().post("scheduler", f"/v1/admin/tenants/{tenant_id}/keys")
    if session.quiet and output is Format.TABLE:
        sys.stdout.write(key["api_key"] + "\n")
        return
    emit(key, output, view=_key_view)


@keys_app.command("revoke")
def keys_revoke(
    ctx: typer.Context, key_id: Annotated[str, typer.Argument(help="The key id (k...).")]
) -> None:
    """Revoke a key: refused here at once, everywhere within AUTH_CACHE_TTL_S."""
    session = session_of(ctx)
    session.client().delete("scheduler", f"/v1/admin/keys/{key_id}")
    session.note(f"revoked {key_id}")


def quota_view(q: dict[str, Any]) -> RenderableType:
    """Each limit next to what the tenant holds now."""
    limits, usage_now = q["limits"], q["usage"]
    rows = [
        {"what": k, "limit": limits.get(k), "used": usage_now.get(k)} for k in ("gpus", "units", "workloads")
    ]
    columns = [
        Column("LIMIT", lambda r: r["what"]),
        Column("MAX", lambda r: UNLIMITED if r["limit"] is None else r["limit"], right=True),
        Column("IN USE", lambda r: r["used"], right=True),
    ]
    return Group(Text(f"tenant {q['tenant_id']}"), table(rows, columns))


@quotas_app.command("get")
def quotas_get(ctx: typer.Context, tenant_id: TenantId, output: Output = Format.TABLE) -> None:
    """A tenant's limits and what it holds now."""
    emit(
        session_of(ctx).client().get("scheduler", f"/v1/admin/tenants/{tenant_id}/quota"),
        output,
        view=quota_view,
    )


def _limit(text: str, *, field: str, integer: bool) -> float | int | None:
    if text == UNLIMITED:
        return None
    try:
        return int(text) if integer else float(text)
    except ValueError:
        raise usage(f"{text!r}: give a number or {UNLIMITED!r}", field=field) from None


@quotas_app.command("set")
def quotas_set(
    ctx: typer.Context,
    tenant_id: TenantId,
    gpus: Annotated[str | None, typer.Option(metavar="N|unlimited", help="Whole GPUs held at once.")] = None,
    units: Annotated[
        str | None, typer.Option(metavar="N|unlimited", help="Compute units held at once.")
    ] = None,
    workloads: Annotated[str | None, typer.Option(metavar="N|unlimited", help="Placed workloads.")] = None,
    output: Output = Format.TABLE,
) -> None:
    """Change some of a tenant's limits; the others stay as they are."""
    client = session_of(ctx).client()
    path = f"/v1/admin/tenants/{tenant_id}/quota"
    limits = dict(client.get("scheduler", path)["limits"])
    for key, given, integer in (
        ("gpus", gpus, True),
        ("units", units, False),
        ("workloads", workloads, True),
    ):
        if given is not None:
            limits[key] = _limit(given, field=key, integer=integer)
    emit(client.put("scheduler", path, json=limits), output, view=quota_view)


def _share_view(s: dict[str, Any]) -> RenderableType:
    return fields(
        [
            ("Tenant", s["tenant_id"]),
            ("Shares", f"{s['shares']:g} of {s['total_shares']:g} ({s['share_fraction'] * 100:.1f}%)"),
            ("Used", f"{s['decayed_usage_unit_hours']:.2f} unit-hours (decayed)"),
            ("Entitled", f"{s['entitlement_unit_hours']:.2f} unit-hours"),
            ("Fair share", f"{s['fair_share']:.3f}"),
        ]
    )


@shares_app.command("get")
def shares_get(ctx: typer.Context, tenant_id: TenantId, output: Output = Format.TABLE) -> None:
    """A tenant's shares and what they entitle it to."""
    emit(
        session_of(ctx).client().get("scheduler", f"/v1/admin/tenants/{tenant_id}/share"),
        output,
        view=_share_view,
    )


@shares_app.command("set")
def shares_set(
    ctx: typer.Context,
    tenant_id: TenantId,
    shares: Annotated[float, typer.Argument(help="Relative weight (default 1).")],
    output: Output = Format.TABLE,
) -> None:
    """Set a tenant's fair-share weight."""
    client = session_of(ctx).client()
    path = f"/v1/admin/tenants/{tenant_id}/share"
    emit(client.put("scheduler", path, json={"shares": shares}), output, view=_share_view)
