"""rules ls/import/export: alert rules, and Prometheus rule files (``groups:``) in and out."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import RenderableType

from libs.gpuctl.commands._options import usage
from libs.gpuctl.render import Column, Format, Output, emit, table
from libs.gpuctl.session import session_of

__all__ = ["register", "rules_view"]

rules_app = typer.Typer(help="Alert rules and Prometheus rule files.", no_args_is_help=True)


def register(root: typer.Typer) -> None:
    """Add the rules group."""
    root.add_typer(rules_app, name="rules")


def _condition(r: dict[str, Any]) -> str:
    if r.get("kind") == "promql":
        return str(r.get("expr") or "")
    of = f"increase({r['metric']}[{r['window']}])" if r.get("kind") == "increase" else r["metric"]
    if r.get("kind") == "absent":
        return f"absent({r['metric']})"
    return f"{of} {r['comparator']} {r['threshold']:g}"


def rules_view(rows: list[dict[str, Any]]) -> RenderableType:
    """One line per rule: its name, condition, for and owner."""
    columns = [
        Column("NAME", lambda r: r["name"]),
        Column("SEVERITY", lambda r: r["severity"]),
        Column("CONDITION", _condition),
        Column("FOR", lambda r: r.get("for")),
        Column("MODE", lambda r: r.get("mode", "stream")),
        Column("OWNER", lambda r: r.get("owner_tenant") or "global"),
    ]
    return table(rows, columns)


@rules_app.command("ls")
def rules_ls(ctx: typer.Context, output: Output = Format.TABLE) -> None:
    """The rules this key sees (its own and the global ones)."""
    emit(session_of(ctx).client().get("alerting", "/v1/rules"), output, view=rules_view)


@rules_app.command("import")
def rules_import(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(help="A Prometheus rule file (groups:); '-' reads stdin.")],
    replace: Annotated[
        bool, typer.Option("--replace", help="Replace rules of the same name (else refused).")
    ] = False,
    output: Output = Format.TABLE,
) -> None:
    """Create the rules of a rule file (or replace them by name, with --replace)."""
    session = session_of(ctx)
    try:
        text = sys.stdin.read() if str(file) == "-" else file.read_text(encoding="utf-8")
    except OSError as exc:
        raise usage(f"cannot read {file}: {exc.strerror}", field="file") from None
    done = session.client().post(
        "alerting",
        "/v1/rules/import",
        content=text.encode(),
        params={"replace": "true"} if replace else None,
        headers={"Content-Type": "application/yaml"},
    )
    emit(done, output, view=_imported)


def _imported(done: dict[str, Any]) -> str:
    """What an import did, and what it warned of (a label no series carries, two rules paging alike)."""
    lines = [f"imported {len(done['imported'])} rule(s): {', '.join(done['imported'])}"]
    if done.get("replaced"):
        lines.append(f"replaced: {', '.join(done['replaced'])}")
    lines += [f"warning: {w}" for w in done.get("warnings", [])]
    return "\n".join(lines)


@rules_app.command("export")
def rules_export(ctx: typer.Context) -> None:
    """Print the rules as a Prometheus rule file."""
    sys.stdout.write(session_of(ctx).client().get_text("alerting", "/v1/rules/export"))
