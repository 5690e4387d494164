"""The one renderer: a table (Rich), JSON or YAML; no colour off a terminal, NO_COLOR honoured.

JSON and YAML print what the service answered with its keys sorted, so a script's ``jq`` keeps working
whatever order the service writes. Tables are plain columns in the manner of ``kubectl get``; every cell is
literal text (a tag holding ``[bold]`` prints as written, never as Rich markup).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation
from enum import StrEnum
from typing import Annotated, Any

import typer
import yaml
from rich.console import Console, JustifyMethod, RenderableType
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

__all__ = [
    "Column",
    "Format",
    "Output",
    "age",
    "bar",
    "cell_text",
    "console",
    "emit",
    "fields",
    "show",
    "table",
    "until",
    "when",
]

#: Width of a table written to a pipe or file when COLUMNS does not say: wide enough that rows stay whole.
PIPE_WIDTH = 512
BAR_WIDTH = 20


class Format(StrEnum):
    """How a read prints its answer."""

    TABLE = "table"
    JSON = "json"
    YAML = "yaml"


Output = Annotated[
    Format,
    typer.Option("--output", "-o", metavar="FORMAT", help="table, json or yaml.", case_sensitive=False),
]


@dataclass(frozen=True)
class Column:
    """One table column: its header and how a row gives the cell."""

    header: str
    cell: Callable[[Any], Any]
    right: bool = False
    wrap: bool = False  # free text may wrap; identifiers and numbers never wrap or shorten


def console(*, stderr: bool = False) -> Console:
    """A console on stdout (or stderr): colour only on a terminal and never with NO_COLOR set."""
    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() or os.environ.get("COLUMNS") else PIPE_WIDTH
    return Console(file=stream, width=width, highlight=False, markup=False, emoji=False, soft_wrap=False)


def emit(data: Any, fmt: Format, *, view: Callable[[Any], RenderableType | str] | None = None) -> None:
    """Print ``data`` as JSON or YAML, or as the table ``view`` draws of it."""
    if fmt is Format.JSON:
        sys.stdout.write(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False, default=str) + "\n")
    elif fmt is Format.YAML:
        sys.stdout.write(yaml.safe_dump(_plain(data), sort_keys=True, allow_unicode=True))
    elif view is None:
        sys.stdout.write(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
    else:
        show(view(data))


def show(drawn: RenderableType | str, *, out: Console | None = None) -> None:
    """Print a renderable whole: wider than the console rather than cutting an id, no padding at line ends."""
    out = out or console()
    renderable = Text(drawn) if isinstance(drawn, str) else drawn
    needed = Measurement.get(out, out.options.update(max_width=PIPE_WIDTH), renderable).minimum
    if needed > out.width:
        out.width = needed
    with out.capture() as captured:
        out.print(renderable)
    lines = captured.get().splitlines()
    out.file.write("".join(line.rstrip() + "\n" for line in lines))
    out.file.flush()


def table(rows: Iterable[Mapping[str, Any]], columns: Sequence[Column], *, title: str | None = None) -> Table:
    """A kubectl-like table: a header row, then one row per item, no borders."""
    grid = Table(box=None, padding=(0, 2, 0, 0), pad_edge=False, title=title, title_justify="left")
    for col in columns:
        justify: JustifyMethod = "right" if col.right else "left"
        if col.wrap:
            grid.add_column(
                col.header, justify=justify, overflow="fold", min_width=min(len(col.header) + 4, 16)
            )
        else:
            grid.add_column(col.header, justify=justify, no_wrap=True)
    for row in rows:
        grid.add_row(*(Text(cell_text(col.cell(row))) for col in columns))
    return grid


def fields(pairs: Iterable[tuple[str, Any]], *, title: str | None = None) -> Table:
    """A two-column listing of one object (``describe``): the name, then the value."""
    grid = Table(
        box=None, show_header=False, padding=(0, 2, 0, 0), pad_edge=False, title=title, title_justify="left"
    )
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    for name, value in pairs:
        grid.add_row(Text(name), Text(cell_text(value)))
    return grid


def bar(used: Any, total: Any, *, width: int = BAR_WIDTH) -> str:
    """A text progress bar of used/total with its percentage: ``████░░░░ 50%`` (readable without colour)."""
    u, t = _number(used), _number(total)
    fraction = 0.0 if t <= 0 else min(max(u / t, 0.0), 1.0)
    filled = round(fraction * width)
    return "█" * filled + "░" * (width - filled) + f" {fraction * 100:3.0f}%"


def cell_text(value: Any) -> str:
    """How one value reads in a cell: '-' for nothing, compact mappings and lists, short times."""
    if value is None or value == "":
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}" if abs(value) >= 1e-3 or value == 0 else f"{value:.2e}"
    if isinstance(value, Mapping):
        return ",".join(f"{k}={v}" for k, v in sorted(value.items())) or "-"
    if isinstance(value, list | tuple):
        return ",".join(cell_text(v) for v in value) or "-"
    return str(value)


def when(value: Any) -> str:
    """An ISO timestamp as ``2025-01-01 12:00:00`` (UTC, to the second)."""
    if not isinstance(value, str):
        return cell_text(value)
    try:
        instant = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return value
    return instant.strftime("%Y-%m-%d %H:%M:%S")


def age(value: Any, *, now: datetime) -> str:
    """How long ago an ISO timestamp was, as kubectl shows ages: 45s, 12m, 5h, 3d ('-' for none)."""
    instant = _instant(value)
    if instant is None:
        return "-"
    return _span((now - instant).total_seconds())


def until(value: Any, *, now: datetime) -> str:
    """How long until an ISO timestamp: 2h, 3d; 'ended' once it passed."""
    instant = _instant(value)
    if instant is None:
        return "-"
    left = (instant - now).total_seconds()
    return _span(left) if left > 0 else "ended"


def _span(seconds: float) -> str:
    s = max(int(seconds), 0)
    for unit, size, below in (("s", 1, 120), ("m", 60, 120 * 60), ("h", 3600, 48 * 3600)):
        if s < below:
            return f"{s // size}{unit}"
    return f"{s // 86400}d"


def _instant(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _number(value: Any) -> float:
    try:
        return float(Decimal(str(value)))
    except (InvalidOperation, ValueError):
        return 0.0


def _plain(data: Any) -> Any:
    """JSON-shaped data as YAML can write it safely (strings, numbers, lists, mappings)."""
    return json.loads(json.dumps(data, default=str))
