"""costs and export: spending grouped by project, team or any tag; a project's ledger as a file."""

from __future__ import annotations

import os
import re
import sys
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, BinaryIO

import httpx
import typer
from rich.console import Group, RenderableType
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn
from rich.text import Text

from libs.gpuctl.commands._options import Tenant, usage
from libs.gpuctl.render import Column, Format, Output, bar, console, emit, table
from libs.gpuctl.session import Session, session_of

__all__ = ["costs_view", "money", "register"]

_MICRO = Decimal(1_000_000)
_FORMATS = ("csv", "jsonl", "parquet")
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]")
Start = Annotated[str | None, typer.Option(help="Inclusive start, ISO 8601 with offset.")]
End = Annotated[str | None, typer.Option(help="Exclusive end, ISO 8601 with offset.")]


def register(root: typer.Typer) -> None:
    """Add costs and export."""
    root.command()(costs)
    root.command("export")(export)


def money(micro: Any) -> str:
    """Micro-units as an exact amount, six decimals so a column lines up: 44102 -> 0.044102."""
    return f"{Decimal(int(micro)) / _MICRO:.6f}"


def costs_view(data: dict[str, Any]) -> RenderableType:
    """One line per group with its amount, unit-hours and share of the total as a bar."""
    total = int(data["total_micro"])
    columns = [
        Column(data["group_by"].upper(), lambda g: g["key"]),
        Column("AMOUNT", lambda g: money(g["amount_micro"]), right=True),
        Column("UNIT-HOURS", lambda g: f"{Decimal(str(g['compute_unit_hours'])):.3f}", right=True),
        Column("SHARE", lambda g: bar(g["amount_micro"], total)),
    ]
    return Group(table(data["groups"], columns), Text(f"total {money(total)}"))


def costs(
    ctx: typer.Context,
    by: Annotated[str, typer.Option(help="project, team, model, day or tag:KEY.")] = "project",
    start: Start = None,
    end: End = None,
    tenant: Tenant = None,
    output: Output = Format.TABLE,
) -> None:
    """Spending by project, team, model, day or tag:KEY."""
    client = session_of(ctx).client()
    params = {"group_by": by, "start": start, "end": end, "tenant_id": tenant}
    emit(client.get("billing", "/v1/costs", params), output, view=costs_view)


def _copy(session: Session, response: httpx.Response, out: BinaryIO, *, label: str) -> int:
    """Copy the body to ``out`` with a progress bar on a terminal; the byte count."""
    total = int(response.headers["content-length"]) if "content-length" in response.headers else None
    err = console(stderr=True)
    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn())
    written = 0
    with Progress(*columns, console=err, disable=session.quiet or not err.is_terminal) as progress:
        task = progress.add_task(label, total=total)
        for chunk in response.iter_bytes():
            out.write(chunk)
            written += len(chunk)
            progress.update(task, advance=len(chunk))
    return written


def export(
    ctx: typer.Context,
    project: Annotated[str, typer.Argument(help="The project (its tag), or 'untagged'.")],
    format: Annotated[str, typer.Option("--format", "-f", help="csv, jsonl or parquet.")] = "csv",
    out: Annotated[Path | None, typer.Option("--output", "-o", help="File to write ('-': stdout).")] = None,
    start: Start = None,
    end: End = None,
    tenant: Tenant = None,
) -> None:
    """A project's ledger as CSV, JSON Lines or Parquet."""
    if format not in _FORMATS:
        raise usage(f"unknown format {format!r}; one of {', '.join(_FORMATS)}", field="format")
    session = session_of(ctx)
    target = out or Path(f"{_SAFE_NAME.sub('_', project)}.{format}")
    params = {"format": format, "start": start, "end": end, "tenant_id": tenant}
    with session.client().stream("billing", f"/v1/exports/{project}", params) as response:
        rows = response.headers.get("x-export-rows", "?")
        if str(target) == "-":
            _copy(session, response, sys.stdout.buffer, label=f"{rows} rows")
            return
        partial = target.with_name(f".{target.name}.part")
        try:
            with partial.open("wb") as fh:
                size = _copy(session, response, fh, label=f"{project}: {rows} rows")
            os.replace(partial, target)
        except OSError as exc:
            raise usage(f"cannot write {target}: {exc.strerror}", field="output") from None
        finally:
            partial.unlink(missing_ok=True)
    session.note(f"wrote {rows} rows ({size} bytes) to {target}")
