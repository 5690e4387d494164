"""incidents, incidents describe and incidents watch: faults found, and their recovery with a progress bar."""

from __future__ import annotations

import sys
from datetime import datetime
from typing import Annotated, Any

import typer
from rich.console import Group, RenderableType
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.text import Text

from libs.gpuctl.client import ApiClient, ExitCode, GpuctlError
from libs.gpuctl.commands._options import Tenant
from libs.gpuctl.render import Column, Format, Output, age, console, emit, fields, table, when
from libs.gpuctl.session import Session, session_of

__all__ = ["detail_view", "incidents_view", "register"]

app = typer.Typer(help="Faults found and how their recovery goes.", invoke_without_command=True)
CLOSED = frozenset({"resolved", "escalated"})
#: Where each state stands on the bar before migrations report their own progress.
_STATE_PERCENT = {"detected": 0, "diagnosing": 5, "draining": 10, "migrating": 15, "verifying": 95}
IncidentId = Annotated[str, typer.Argument(help="The incident (inc-...).")]


def register(root: typer.Typer) -> None:
    """Add the incidents group."""
    root.add_typer(app, name="incidents")


def incidents_view(rows: list[dict[str, Any]], *, now: datetime) -> RenderableType:
    """One line per incident: its state, fault, action, node and AGE since detection (GPU: describe)."""
    columns = [
        Column("ID", lambda i: i["incident_id"]),
        Column("STATE", lambda i: i["state"]),
        Column("FAULT", lambda i: i["fault_type"]),
        Column("SEVERITY", lambda i: i["severity"]),
        Column("ACTION", lambda i: i["action"]),
        Column("NODE", lambda i: i["node"]),
        Column("AGE", lambda i: age(i["detected_at"], now=now), right=True),
    ]
    return table(rows, columns)


@app.callback()
def incidents(
    ctx: typer.Context,
    state: Annotated[str | None, typer.Option(help="Only this state, e.g. migrating or resolved.")] = None,
    node: Annotated[str | None, typer.Option(help="Only this node.")] = None,
    gpu: Annotated[str | None, typer.Option(help="Only this GPU.")] = None,
    limit: Annotated[int, typer.Option(help="At most this many.", min=1, max=500)] = 100,
    tenant: Tenant = None,
    output: Output = Format.TABLE,
) -> None:
    """List incidents, newest first (subcommands: describe, watch)."""
    if ctx.invoked_subcommand is not None:
        return
    session = session_of(ctx)
    params = {"state": state, "node": node, "gpu": gpu, "limit": limit, "tenant_id": tenant}
    now = session.now()
    emit(
        session.client().get("recovery", "/v1/incidents", params),
        output,
        view=lambda r: incidents_view(r, now=now),
    )


def progress_of(incident: dict[str, Any]) -> int:
    """Where the incident stands, 0-100: its migrations' mean once they report, else by state."""
    if incident["state"] in CLOSED:
        return 100
    reported = incident.get("progress_percent")
    floor = _STATE_PERCENT.get(incident["state"], 0)
    return max(floor, int(reported)) if reported is not None else floor


def _phase(incident: dict[str, Any]) -> str:
    moves = incident.get("migrations") or []
    phases = ", ".join(f"{m['workload_id']} {m['phase']} {m['percent']}%" for m in moves)
    return f"{incident['state']}" + (f" ({phases})" if phases else "")


def detail_view(i: dict[str, Any]) -> RenderableType:
    """One incident: what, where, the diagnosis, every state change, every migration and every device
    action its hosts reported (resets, reboots: admins see them)."""
    diagnosis = i.get("diagnosis") or {}
    summary = fields(
        [
            ("ID", i["incident_id"]),
            ("State", i["state"]),
            ("Fault", f"{i['fault_type']} ({i['severity']}, owner {i['owner']})"),
            ("Action", i["action"]),
            ("Where", f"{i['node']} {i.get('gpu') or ''}".strip()),
            ("Progress", f"{progress_of(i)}%"),
            ("Probable cause", diagnosis.get("probable_cause")),
            ("Detected", when(i["detected_at"])),
            ("Recovered", when(i.get("recovered_at"))),
            ("Closed", when(i.get("closed_at"))),
            ("Escalation", i.get("escalation_reason")),
        ]
    )
    history = table(
        i.get("history") or [],
        [
            Column("AT", lambda h: when(h["at"])),
            Column("STATE", lambda h: h["state"]),
            Column("WHY", lambda h: h.get("reason"), wrap=True),
        ],
    )
    moves = table(
        i.get("migrations") or [],
        [Column("WORKLOAD", lambda m: m["workload_id"]), Column("PHASE", lambda m: m["phase"]),
         Column("PERCENT", lambda m: m["percent"], right=True)],
    )  # fmt: skip
    parts: list[RenderableType] = [summary, Text(""), history, Text(""), moves]
    if actions := i.get("actions") or []:
        parts += [Text(""), table(actions, [
            Column("AT", lambda a: when(a["at"])), Column("ACTION", lambda a: a["action"]),
            Column("OUTCOME", lambda a: a["outcome"]),
            Column("EXIT", lambda a: "-" if a.get("exit_code") is None else a["exit_code"], right=True),
            Column("WHAT THE HOST SAID", _host_said, wrap=True),
        ])]  # fmt: skip
    return Group(*parts)


def _host_said(action: dict[str, Any]) -> str:
    """The agent's reason, then the first line of what the commands printed."""
    first = next((line.strip() for line in str(action.get("output") or "").splitlines() if line.strip()), "")
    return "; ".join(part for part in (action.get("reason") or "", first) if part) or "-"


@app.command("describe")
def describe(ctx: typer.Context, incident_id: IncidentId, output: Output = Format.TABLE) -> None:
    """One incident in full: diagnosis, state history, migrations, the hosts' resets and reboots."""
    emit(session_of(ctx).client().get("recovery", f"/v1/incidents/{incident_id}"), output, view=detail_view)


def _follow(
    session: Session, client: ApiClient, incident_id: str, *, timeout: float, interval: float
) -> dict[str, Any]:
    """Poll until the incident closes or ``timeout`` passes: a bar, or a line per change off a terminal."""
    path = f"/v1/incidents/{incident_id}"
    incident: dict[str, Any] = client.get("recovery", path)
    deadline = session.clock() + timeout
    err = console(stderr=True)
    show_bar = err.is_terminal and not session.quiet
    progress = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                        TimeElapsedColumn(), console=err, disable=not show_bar)  # fmt: skip
    with progress:
        task: TaskID = progress.add_task(_phase(incident), total=100, completed=progress_of(incident))
        last = ""
        while True:
            line = f"{incident_id} {_phase(incident)} {progress_of(incident)}%"
            if not show_bar and not session.quiet and line != last:
                sys.stderr.write(line + "\n")
            last = line
            progress.update(task, description=_phase(incident), completed=progress_of(incident))
            if incident["state"] in CLOSED or session.clock() >= deadline:
                return incident
            session.sleep(interval)
            incident = client.get("recovery", path)


@app.command("watch")
def watch(
    ctx: typer.Context,
    incident_id: IncidentId,
    timeout: Annotated[float, typer.Option(help="Give up after this many seconds (exit 1).")] = 600.0,
    interval: Annotated[float, typer.Option(help="Seconds between polls.", min=0.1)] = 1.0,
    output: Output = Format.TABLE,
) -> None:
    """Follow a recovery with a progress bar until the incident closes (exit 1: escalated or timed out)."""
    session = session_of(ctx)
    incident = _follow(session, session.client(), incident_id, timeout=timeout, interval=interval)
    if output is not Format.TABLE:
        emit(incident, output)
    elif not session.quiet:
        sys.stdout.write(f"{incident_id} {incident['state']}\n")
    if incident["state"] == "escalated":
        raise GpuctlError(f"{incident_id} escalated: {incident.get('escalation_reason') or 'needs a person'}")
    if incident["state"] not in CLOSED:
        raise GpuctlError(
            f"{incident_id} still {incident['state']} after {timeout:g} s",
            exit_code=ExitCode.ERROR,
            field="timeout",
        )
