"""logs and outputs: what a workload printed (``-f`` follows it, as kubectl logs) and the files it left."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, BinaryIO
from urllib.parse import quote

import httpx
import typer
from rich.console import Group, RenderableType
from rich.text import Text

from libs.gpuctl.commands._options import usage
from libs.gpuctl.render import Column, Format, emit, table
from libs.gpuctl.session import Session, session_of

__all__ = ["outputs_view", "register", "sse_events", "write_log"]

WorkloadId = Annotated[str, typer.Argument(help="The workload (wl-...).")]
ListFormat = Annotated[
    Format,
    typer.Option("--format", metavar="FORMAT", help="The list as table, json or yaml.", case_sensitive=False),
]


def register(root: typer.Typer) -> None:
    """Add logs and outputs."""
    root.command()(logs)
    root.command()(outputs)


def sse_events(lines: Iterator[str]) -> Iterator[tuple[str, str]]:
    """Server-Sent Events as (event, data); comments (the pings) and ids are skipped."""
    kind, data = "message", list[str]()
    for line in lines:
        if not line:
            if data:
                yield kind, "\n".join(data)
            kind, data = "message", list[str]()
        elif line.startswith(":"):
            continue
        else:
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "event":
                kind = value
            elif name == "data":
                data.append(value)
    if data:
        yield kind, "\n".join(data)


def write_log(text: str) -> None:
    """Log text to stdout as it came (no added newline), flushed so a pipe sees it at once."""
    sys.stdout.write(text)
    sys.stdout.flush()


def _follow(session: Session, response: httpx.Response) -> None:
    for kind, data in sse_events(response.iter_lines()):
        if kind == "log":
            write_log(data)
        elif kind == "end":
            if '"complete": false' in data:
                session.note("the log ended incomplete: the host shipped no end of its last part")
            return


def logs(
    ctx: typer.Context,
    workload_id: WorkloadId,
    tail: Annotated[int | None, typer.Option(min=0, metavar="N", help="Only the last N lines.")] = None,
    since: Annotated[
        str | None,
        typer.Option(
            metavar="TIME|DURATION", help="Only what was read since: 5m, 1h30m or an RFC 3339 time."
        ),
    ] = None,
    placement: Annotated[str | None, typer.Option(metavar="ID", help="Only this placement's log.")] = None,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing until the workload ends.")
    ] = False,
) -> None:
    """A workload's stdout and stderr; -f follows it.

    Every placement's log, in order (a requeued or migrated job has several).
    """
    session = session_of(ctx)
    params = {"tail": tail, "since": since, "placement": placement, "follow": follow or None}
    with session.client().stream("scheduler", f"/v1/workloads/{workload_id}/logs", params) as response:
        if follow:
            _follow(session, response)
            return
        for chunk in response.iter_bytes():
            sys.stdout.buffer.write(chunk)
        sys.stdout.flush()
        if response.headers.get("x-log-truncated") == "true":
            omitted = response.headers.get("x-log-omitted-bytes", "?")
            session.note(f"the log was cut: its first {omitted} bytes are left out (use --tail or --since)")


def outputs_view(manifest: dict[str, Any]) -> RenderableType:
    """The files a workload left, and those the host dropped (over the cap)."""
    files = manifest.get("files") or []
    parts: list[RenderableType] = [
        table(files, [Column("PATH", lambda f: f["path"]), Column("SIZE", lambda f: f["size"], right=True)])
    ]
    dropped = manifest.get("dropped") or []
    if dropped:
        columns = [
            Column("PATH", lambda f: f["path"]),
            Column("SIZE", lambda f: f["size"], right=True),
            Column("WHY", lambda f: f.get("why"), wrap=True),
        ]
        parts.append(table(dropped, columns, title="Dropped"))
    total = manifest.get("total_bytes")
    parts.append(Text(f"{len(files)} files, {total} bytes (placement {manifest.get('placement_id')})"))
    return Group(*parts)


def _download(response: httpx.Response, target: Path) -> int:
    if str(target) == "-":
        return _copy(response, sys.stdout.buffer)
    partial = target.with_name(f".{target.name}.part")
    try:
        with partial.open("wb") as fh:
            size = _copy(response, fh)
        os.replace(partial, target)
    except OSError as exc:
        raise usage(f"cannot write {target}: {exc.strerror}", field="output") from None
    finally:
        partial.unlink(missing_ok=True)
    return size


def _copy(response: httpx.Response, out: BinaryIO) -> int:
    written = 0
    for chunk in response.iter_bytes():
        out.write(chunk)
        written += len(chunk)
    out.flush()
    return written


def outputs(
    ctx: typer.Context,
    workload_id: WorkloadId,
    path: Annotated[str | None, typer.Argument(help="One file to download (as listed).")] = None,
    out: Annotated[
        Path | None, typer.Option("--output", "-o", metavar="FILE", help="Where the file goes ('-': stdout).")
    ] = None,
    fmt: ListFormat = Format.TABLE,
) -> None:
    """A job's output files; with PATH, download one.

    What the job left in $GPUCLOUD_OUTPUT_DIR on its last placement; -o FILE says where it goes.
    """
    session = session_of(ctx)
    client = session.client()
    if path is None:
        if out is not None:
            raise usage("-o names where a downloaded file goes: give the PATH to download", field="output")
        emit(client.get("scheduler", f"/v1/workloads/{workload_id}/outputs"), fmt, view=outputs_view)
        return
    target = out or Path(path.rsplit("/", 1)[-1])
    with client.stream(
        "scheduler", f"/v1/workloads/{workload_id}/outputs/{quote(path, safe='/')}"
    ) as response:
        size = _download(response, target)
    if str(target) != "-":
        session.note(f"wrote {size} bytes to {target}")
