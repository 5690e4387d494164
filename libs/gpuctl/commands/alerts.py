"""alerts and silence add/ls/expire, with matchers as amtool writes them: name=value, =~, != and !~."""

from __future__ import annotations

import re
import sys
from datetime import datetime
from typing import Annotated, Any

import typer
from rich.console import RenderableType

from libs.gpuctl.client import GpuctlError
from libs.gpuctl.commands._options import Tenant, parse_duration, usage
from libs.gpuctl.render import Column, Format, Output, age, emit, table, until
from libs.gpuctl.session import session_of

__all__ = ["alerts_view", "format_matcher", "parse_matcher", "register", "silences_view"]

silence_app = typer.Typer(help="Mute alerts that match, for a while (amtool silence).", no_args_is_help=True)
_MATCHER = re.compile(r"\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*(.*?)\s*")
_BARE = re.compile(r"[A-Za-z0-9_.:-]+")


def register(root: typer.Typer) -> None:
    """Add alerts and the silence group."""
    root.command()(alerts)
    root.add_typer(silence_app, name="silence")


def parse_matcher(text: str) -> dict[str, str]:
    """One amtool matcher: ``severity=critical``, ``gpu=~"GPU-1.*"``, ``node!=a``; a bare word: alertname."""
    if _BARE.fullmatch(text):
        return {"name": "alertname", "op": "=", "value": text}
    found = _MATCHER.fullmatch(text)
    if found is None:
        raise usage(
            f"{text!r} is not a matcher: write name=value, name=~regex, name!=value or name!~regex",
            field="matchers",
        )
    name, op, value = found.groups()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        value = re.sub(r"\\(.)", r"\1", value[1:-1])
    return {"name": name, "op": op, "value": value}


def format_matcher(m: dict[str, Any]) -> str:
    """A matcher as amtool prints it: ``name=~"value"``."""
    escaped = str(m["value"]).replace("\\", "\\\\").replace('"', '\\"')
    return f'{m["name"]}{m["op"]}"{escaped}"'


def _labels(a: dict[str, Any]) -> str:
    labels = a.get("labels") or {}
    return " ".join(f"{k}={labels[k]}" for k in sorted(labels) if k not in ("alertname", "severity"))


def alerts_view(rows: list[dict[str, Any]], *, now: datetime) -> RenderableType:
    """One line per alert: the rule, its severity and status, value, AGE since it started, and its labels."""
    columns = [
        Column("RULE", lambda a: a["rule"]),
        Column("SEVERITY", lambda a: a["severity"]),
        Column("STATUS", lambda a: a["status"]),
        Column("VALUE", lambda a: a.get("value"), right=True),
        Column("AGE", lambda a: age(a["starts_at"], now=now), right=True),
        Column("LABELS", _labels, wrap=True),
    ]
    return table(rows, columns)


def alerts(
    ctx: typer.Context,
    history: Annotated[bool, typer.Option("--history", help="Firing and resolved, newest first.")] = False,
    rule: Annotated[str | None, typer.Option(help="With --history: only this rule.")] = None,
    limit: Annotated[int, typer.Option(help="At most this many.", min=1, max=1000)] = 100,
    tenant: Tenant = None,
    output: Output = Format.TABLE,
) -> None:
    """The alerts firing now (or their history)."""
    session = session_of(ctx)
    params: dict[str, Any] = {"tenant": tenant, "limit": limit}
    if history:
        params["rule"] = rule
    elif rule is not None:
        raise usage("--rule needs --history", field="rule")
    found = session.client().get("alerting", "/v1/alerts/history" if history else "/v1/alerts", params)
    now = session.now()
    emit(found, output, view=lambda r: alerts_view(r, now=now))


def _instant(text: str | None, *, field: str) -> datetime | None:
    if text is None:
        return None
    try:
        instant = datetime.fromisoformat(text)
    except ValueError:
        raise usage(f"{text!r} is not an ISO 8601 time, e.g. 2025-03-01T12:00:00Z", field=field) from None
    if instant.tzinfo is None:
        raise usage(f"{text!r}: give a timezone, e.g. 2025-03-01T12:00:00Z", field=field)
    return instant


@silence_app.command("add")
def silence_add(
    ctx: typer.Context,
    matchers: Annotated[list[str], typer.Argument(help='e.g. alertname=GpuMemoryHigh node=~"gpu-a.*".')],
    comment: Annotated[str, typer.Option("--comment", "-c", help="Why (required, as amtool asks).")],
    duration: Annotated[str, typer.Option("--duration", "-d", help="How long: 30m, 2h, 1d.")] = "1h",
    start: Annotated[str | None, typer.Option(help="ISO 8601 start (default: now).")] = None,
    end: Annotated[str | None, typer.Option(help="ISO 8601 end (wins over --duration).")] = None,
    output: Output = Format.TABLE,
) -> None:
    """Mute the alerts matching every MATCHER; prints the silence id."""
    session = session_of(ctx)
    parsed = [parse_matcher(m) for m in matchers]
    starts = _instant(start, field="start")
    lasting = parse_duration(duration, field="duration")
    ends = _instant(end, field="end") or (starts or session.now()) + lasting
    body = {"matchers": parsed, "ends_at": ends.isoformat(), "comment": comment}
    if starts is not None:
        body["starts_at"] = starts.isoformat()
    created = session.client().post("alerting", "/v1/silences", json=body)
    emit(created, output, view=lambda s: s["id"])


def silences_view(rows: list[dict[str, Any]], *, now: datetime) -> RenderableType:
    """One line per silence, as amtool silence query shows them (ENDS: how long it still mutes)."""
    columns = [
        Column("ID", lambda s: s["id"]),
        Column("MATCHERS", lambda s: " ".join(format_matcher(m) for m in s["matchers"]), wrap=True),
        Column("ENDS", lambda s: until(s["ends_at"], now=now), right=True),
        Column("COMMENT", lambda s: s["comment"], wrap=True),
    ]
    return table(rows, columns)


@silence_app.command("ls")
def silence_ls(
    ctx: typer.Context,
    expired: Annotated[bool, typer.Option("--expired", help="Include expired silences.")] = False,
    output: Output = Format.TABLE,
) -> None:
    """The silences in force (or all of them)."""
    session = session_of(ctx)
    found = session.client().get("alerting", "/v1/silences", {"include_expired": expired})
    now = session.now()
    emit(found, output, view=lambda r: silences_view(r, now=now))


@silence_app.command("expire")
def silence_expire(
    ctx: typer.Context, silence_ids: Annotated[list[str], typer.Argument(help="One or more silence ids.")]
) -> None:
    """End silences now (each is tried; the first failure sets the exit code)."""
    session = session_of(ctx)
    client = session.client()
    first: GpuctlError | None = None
    for silence_id in silence_ids:
        try:
            client.delete("alerting", f"/v1/silences/{silence_id}")
        except GpuctlError as exc:
            first = first or exc
            sys.stderr.write(f"{silence_id}: {exc.line()}\n")
            continue
        session.note(f"expired {silence_id}")
    if first is not None:
        raise typer.Exit(int(first.exit_code))
