"""login, whoami and contexts: where the services are and which key to use, per installation."""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from typing import Annotated, Any

import typer
from rich.console import RenderableType
from rich.prompt import Prompt

from libs.gpuctl.client import ApiClient, ExitCode, GpuctlError
from libs.gpuctl.commands._options import usage
from libs.gpuctl.config import DEFAULT_BASE_PORT, DEFAULT_URL, KEY_ENV, SERVICES, Context, check_url, save
from libs.gpuctl.render import Column, Format, Output, emit, fields, table
from libs.gpuctl.session import Session, session_of

__all__ = ["app", "register"]

app = typer.Typer(help="List, choose and forget login contexts.", invoke_without_command=True)
DEFAULT_CONTEXT = "default"


def register(root: typer.Typer) -> None:
    """Add login and whoami to the root, and the contexts group."""
    root.command()(login)
    root.command()(whoami)
    root.add_typer(app, name="contexts")


def key_id_of(key: str | None) -> str:
    """The key id inside a tenant key (``gck_<id>_<secret>``); 'admin' or '-' otherwise."""
    if not key:
        return "-"
    parts = key.split("_")
    return parts[1] if len(parts) >= 3 and parts[0] == "gck" else "admin"


def role_of(client: ApiClient) -> str:
    """'admin' or 'tenant', by whether the key may list tenants; a key no service knows fails (exit 3)."""
    try:
        client.get("scheduler", "/v1/admin/tenants")
    except GpuctlError as exc:
        if exc.status == 403:
            return "tenant"
        raise
    return "admin"


def _services(items: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or []:
        name, sep, url = item.partition("=")
        if not sep or name not in SERVICES:
            raise usage(
                f"{item!r}: expected NAME=URL with NAME one of {', '.join(SERVICES)}", field="service"
            )
        out[name] = url.rstrip("/")
    return out


def _key(session: Session, given: str | None) -> str:
    if given == "-":
        return sys.stdin.readline().strip()
    if given:
        return given
    if os.environ.get(KEY_ENV):
        return os.environ[KEY_ENV]
    if session.interactive():
        return Prompt.ask("API key", password=True)
    raise usage("give --key KEY (or --key - to read it from stdin), or set GPUCTL_API_KEY", field="key")


def login(
    ctx: typer.Context,
    url: Annotated[str, typer.Option(help="The installation: scheme and host.")] = DEFAULT_URL,
    base_port: Annotated[
        int, typer.Option(help="Port of inventory; the others follow it.")
    ] = DEFAULT_BASE_PORT,
    service: Annotated[
        list[str] | None, typer.Option(help="NAME=URL for a service elsewhere (repeatable).")
    ] = None,
    key: Annotated[str | None, typer.Option(help="The API key; '-' reads it from stdin.")] = None,
    tenant: Annotated[str | None, typer.Option(help="The key's tenant, shown by whoami.")] = None,
    output: Output = Format.TABLE,
) -> None:
    """Check a key and store it as a context (mode 0600).

    The context is named by --context (default: 'default') and becomes the current one.
    """
    session = session_of(ctx)
    name = session.context_flag or DEFAULT_CONTEXT
    context = Context(url=check_url(url), base_port=base_port, tenant=tenant, services=_services(service))
    context = replace(context, api_key=_key(session, key))
    if not context.api_key:
        raise usage("the API key is empty", field="key")
    role = role_of(session.client(context))
    save(session.config().with_context(name, context), session.config_file())
    info = _identity(name, context, role=role, from_env=False)
    emit(
        info,
        output,
        view=lambda i: f"logged in: {i['role']} key {i['key_id']} on {i['url']} (context {name!r})",
    )
    session.note(f"saved to {session.config_file()}")


def whoami(ctx: typer.Context, output: Output = Format.TABLE) -> None:
    """Which context, key and role this shell uses."""
    session = session_of(ctx)
    target = session.target()
    role = role_of(session.client())
    info = _identity(target.name, target.context, role=role, from_env=target.key_from_env)
    emit(info, output, view=_identity_view)


def _identity_view(info: dict[str, Any]) -> RenderableType:
    rows = [(k, v) for k, v in info.items() if k != "services"]
    rows += [(f"  {service}", url) for service, url in info["services"].items()]
    return fields(rows)


def _identity(name: str | None, context: Context, *, role: str, from_env: bool) -> dict[str, Any]:
    return {
        "context": name,
        "url": context.url,
        "services": {s: context.service_url(s) for s in SERVICES},
        "role": role,
        "key_id": key_id_of(context.api_key),
        "key_from": "GPUCTL_API_KEY" if from_env else "config",
        "tenant": context.tenant if role == "tenant" else None,
    }


@app.callback()
def contexts(ctx: typer.Context, output: Output = Format.TABLE) -> None:
    """List the contexts (* marks the current one); keys show only their id."""
    if ctx.invoked_subcommand is not None:
        return
    config = session_of(ctx).config()
    rows = [
        {
            "name": name,
            "current": name == config.current,
            "url": c.url,
            "base_port": c.base_port,
            "services": dict(c.services),
            "key_id": key_id_of(c.api_key),
            "tenant": c.tenant,
        }
        for name, c in sorted(config.contexts.items())
    ]
    columns = [
        Column("CURRENT", lambda r: "*" if r["current"] else ""),
        Column("NAME", lambda r: r["name"]),
        Column("URL", lambda r: r["url"]),
        Column("BASE PORT", lambda r: r["base_port"], right=True),
        Column("KEY", lambda r: r["key_id"]),
        Column("TENANT", lambda r: r["tenant"]),
    ]
    emit(rows, output, view=lambda r: table(r, columns))


@app.command("use")
def use(ctx: typer.Context, name: Annotated[str, typer.Argument(help="Context to make current.")]) -> None:
    """Make NAME the current context."""
    session = session_of(ctx)
    config = session.config()
    if name not in config.contexts:
        raise GpuctlError(f"no context {name!r}", exit_code=ExitCode.NOT_FOUND, field="name")
    save(replace(config, current=name), session.config_file())
    session.note(f"current context: {name}")


@app.command("delete")
def delete(ctx: typer.Context, name: Annotated[str, typer.Argument(help="Context to forget.")]) -> None:
    """Forget NAME and its key."""
    session = session_of(ctx)
    config = session.config()
    if name not in config.contexts:
        raise GpuctlError(f"no context {name!r}", exit_code=ExitCode.NOT_FOUND, field="name")
    save(config.without(name), session.config_file())
    session.note(f"deleted context {name}")
