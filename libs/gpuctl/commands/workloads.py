"""submit, ls, describe, priority, cancel: a tenant's workloads (as sbatch, squeue, sprio, scancel)."""

from __future__ import annotations

import shlex
import sys
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.console import Group, RenderableType
from rich.text import Text

from libs.gpuctl.client import GpuctlError
from libs.gpuctl.commands import _spec as spec
from libs.gpuctl.commands._options import Tenant, usage
from libs.gpuctl.render import Column, Format, Output, age, cell_text, emit, fields, table, when
from libs.gpuctl.session import session_of

__all__ = [
    "describe_view",
    "exit_text",
    "host_text",
    "ls_view",
    "notes_rows",
    "priority_view",
    "register",
    "resources_text",
]

#: The scheduler's largest job array (POST /v1/workload-arrays), and the variable that tells a copy its index.
MAX_ARRAY = 10_000
ARRAY_TASK_ENV = "GPUCLOUD_ARRAY_TASK_ID"
_STATES = ("queued", "migrating", "placed", "running", "completed", "failed", "cancelled", "preempted")


def register(root: typer.Typer) -> None:
    """Add submit, ls, describe, priority and cancel."""
    root.command()(submit)
    root.command("ls")(ls)
    root.command()(describe)
    root.command()(priority)
    root.command()(cancel)


def resources_text(resources: dict[str, Any] | None) -> str:
    """``2x A100-80GB``, ``mig 1g.10gb``, ``2.5 units``."""
    if not resources:
        return "-"
    kind = resources.get("kind")
    if kind == "gpu":
        return f"{resources.get('count')}x {resources.get('model')}"
    if kind == "mig":
        on = f" on {resources['model']}" if resources.get("model") else ""
        return f"mig {resources.get('profile')}{on}"
    return f"{resources.get('units')} units"


def _image(w: dict[str, Any]) -> str:
    image = (w.get("spec") or {}).get("image") or {}
    return f"{image.get('name')}:{image.get('version')}" if image else "-"


def _command(w: dict[str, Any]) -> str:
    run = w.get("run") or {}
    return shlex.join([*(run.get("command") or []), *(run.get("args") or [])]) or "-"


def host_text(host: dict[str, Any] | None) -> str:
    """``pid 4242 (process)``, ``container 3f2a... (podman)``: where the current run lives on its host."""
    if not host:
        return "-"
    where = f"pid {host['pid']}" if host.get("pid") is not None else f"container {host.get('container_id')}"
    return f"{where} ({host['runner']})" if host.get("runner") else where


def notes_rows(host: dict[str, Any] | None) -> list[tuple[str, str]]:
    """``Notes  memory not isolated`` and one line per further note; nothing when the host said none."""
    notes = [str(n) for n in (host or {}).get("notes") or []]
    return [("Notes" if i == 0 else "", note) for i, note in enumerate(notes)]


def exit_text(exited: dict[str, Any] | None) -> str:
    """``failed, exit code 3``, ``cancelled, signal 15``: how the host says the run ended."""
    if not exited:
        return "-"
    parts = [exited.get("reason") or "exited"]
    if exited.get("code") is not None:
        parts.append(f"exit code {exited['code']}")
    if exited.get("signal") is not None:
        parts.append(f"signal {exited['signal']}")
    return ", ".join(parts)


def _waiting(w: dict[str, Any]) -> str:
    if w.get("position") is None:
        return cell_text(w.get("wait_reason"))
    return f"#{w['position']} {w.get('wait_reason') or ''}".strip()


def ls_view(rows: list[dict[str, Any]], *, now: datetime) -> RenderableType:
    """One line per workload, newest first as the scheduler answers; AGE since it was submitted."""
    columns = [
        Column("ID", lambda w: w["workload_id"]),
        Column("TENANT", lambda w: w["tenant_id"]),
        Column("KIND", lambda w: w["kind"]),
        Column("STATE", lambda w: w["state"]),
        Column("PRIO", lambda w: f"{w['priority']:.3f}", right=True),
        Column("QUEUE", _waiting),
        Column("RESOURCES", lambda w: resources_text((w.get("spec") or {}).get("resources"))),
        Column("PROJECT", lambda w: (w.get("tags") or {}).get("project")),
        Column("AGE", lambda w: age(w["submitted_at"], now=now), right=True),
    ]
    return table(rows, columns)


def describe_view(w: dict[str, Any]) -> RenderableType:
    """Every field of one workload, one per line."""
    s = w.get("spec") or {}
    network = s.get("network") or {}
    return fields(
        [
            ("ID", w["workload_id"]),
            ("Tenant", w["tenant_id"]),
            ("Kind", w["kind"]),
            ("State", w["state"]),
            ("Image", _image(w)),
            ("Image ref", (w.get("run") or {}).get("image")),
            ("Command", _command(w)),
            ("Resources", resources_text(s.get("resources"))),
            ("Network", " ".join(f"{k}={network[k]}" for k in sorted(network)) or "-"),
            ("Urgency", w["urgency"]),
            ("Priority", f"{w['priority']:.3f}"),
            ("Preemptible", w["preemptible"]),
            ("Time limit", s.get("time_limit_s") and f"{s['time_limit_s']} s"),
            ("Tags", w.get("tags")),
            ("Queue", _waiting(w)),
            ("Estimated start", when(w.get("estimated_start"))),
            ("Placement", w.get("placement_id")),
            ("Submitted", when(w["submitted_at"])),
            ("Ended", when(w.get("ended_at"))),
            ("Outcome", w.get("outcome")),
            ("Reason", w.get("reason")),
            ("Host", host_text(w.get("host"))),
            *notes_rows(w.get("host")),
            ("Exit", exit_text(w.get("exit"))),
        ]
    )


def _spec_file(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        text = sys.stdin.read() if str(path) == "-" else path.read_text(encoding="utf-8")
        loaded = yaml.safe_load(text)
    except (OSError, yaml.YAMLError) as exc:
        raise usage(f"cannot read the spec {path}: {exc}", field="file") from None
    if not isinstance(loaded, dict):
        raise usage(f"{path}: a spec is a mapping of image, resources, network and options", field="file")
    return loaded


def submit(
    ctx: typer.Context,
    file: Annotated[Path | None, typer.Option("--file", "-f", help="A YAML spec; '-' reads stdin.")] = None,
    image: spec.Image = None,
    gpu: spec.Gpu = None,
    mig: spec.Mig = None,
    units: spec.Units = None,
    vpc: spec.Vpc = None,
    subnet: spec.Subnet = None,
    sg: spec.SecurityGroup = None,
    public_ip: spec.PublicIp = None,
    kind: spec.Kind = None,
    urgency: spec.Urgency = None,
    tag: spec.Tag = None,
    constraint: spec.Constraint = None,
    preemptible: spec.Preemptible = None,
    time_limit: spec.TimeLimit = None,
    gang: spec.Gang = None,
    command: spec.Command = None,
    env: spec.Env = None,
    workdir: spec.Workdir = None,
    cpu: spec.Cpu = None,
    memory: spec.Memory = None,
    grace: spec.Grace = None,
    argv: spec.Argv = None,
    array: Annotated[
        int | None,
        typer.Option(
            "--array",
            min=1,
            max=MAX_ARRAY,
            metavar="N",
            help=f"Submit N copies as one job array (1..{MAX_ARRAY}), all or none; copy i runs with "
            f"{ARRAY_TASK_ENV}=i, as Slurm's --array=0-(N-1) sets SLURM_ARRAY_TASK_ID.",
        ),
    ] = None,
    idempotency_key: Annotated[
        str | None,
        typer.Option(help="With --array: a retry under the same key is answered, never stored twice."),
    ] = None,
    tenant: Tenant = None,
    output: Output = Format.TABLE,
) -> None:
    """Submit a job from flags or a YAML spec (-f), or N copies of it as one job array (--array N).

    The spec is the request body as YAML; flags given too win over it.
    """
    session = session_of(ctx)
    flags = spec.SpecFlags(
        image=image, gpu=gpu, mig=mig, units=units, vpc=vpc, subnet=subnet, sg=sg, public_ip=public_ip,
        kind=kind, urgency=urgency, tag=tag, constraint=constraint, preemptible=preemptible,
        time_limit=time_limit, gang=gang, command=command, argv=argv, env=env, workdir=workdir, cpu=cpu,
        memory=memory, grace=grace,
    )  # fmt: skip
    body = flags.body(_spec_file(file))
    body.setdefault("kind", "job")
    if array is None:
        if idempotency_key is not None:
            raise usage("--idempotency-key goes with --array", field="idempotency_key")
        created = session.client().post("scheduler", "/v1/workloads", json=body, params={"tenant_id": tenant})
        show_created(created, output, quiet=session.quiet)
        return
    submitted = session.client().post(
        "scheduler",
        "/v1/workload-arrays",
        json={"items": array_items(body, array)},
        params={"tenant_id": tenant},
        headers={"Idempotency-Key": idempotency_key} if idempotency_key else None,
    )
    show_array(submitted, output, quiet=session.quiet)


def array_items(body: dict[str, Any], count: int) -> list[dict[str, Any]]:
    """``count`` copies of one request, copy i told its index in its environment."""
    env = body.get("env") or {}
    return [{**body, "env": {**env, ARRAY_TASK_ENV: str(i)}} for i in range(count)]


def show_array(submitted: dict[str, Any], output: Output, *, quiet: bool) -> None:
    """A new array: its workloads' ids alone with --quiet, else its id and the ids as the format says."""
    ids = [item["workload_id"] for item in submitted["items"]]
    if quiet and output is Format.TABLE:
        sys.stdout.write("".join(f"{i}\n" for i in ids))
        return
    emit(
        submitted,
        output,
        view=lambda a: (
            f"{a['array_id']}: {a['count']} workloads queued ({ids[0]} .. {ids[-1]}); "
            f"list them with gpuctl ls --array {a['array_id']}"
        ),
    )


def show_created(created: dict[str, Any], output: Output, *, quiet: bool) -> None:
    """A new workload: its id alone with --quiet, else as the output format says."""
    if quiet and output is Format.TABLE:
        sys.stdout.write(created["workload_id"] + "\n")
        return
    emit(created, output, view=lambda w: f"{w['workload_id']} {w['state']} (priority {w['priority']:.3f})")


def ls(
    ctx: typer.Context,
    state: Annotated[str | None, typer.Option(help=f"Only this state: {', '.join(_STATES)}.")] = None,
    limit: Annotated[int, typer.Option(help="At most this many.", min=1, max=1000)] = 100,
    offset: Annotated[int, typer.Option(help="Skip this many first (to page).", min=0)] = 0,
    array: Annotated[
        str | None, typer.Option(help="Only this job array's workloads (arr-...), in item order.")
    ] = None,
    tenant: Tenant = None,
    output: Output = Format.TABLE,
) -> None:
    """Your workloads: state, priority, place in the queue."""
    session = session_of(ctx)
    query = {"state": state, "limit": limit, "offset": offset or None, "array": array, "tenant_id": tenant}
    rows = session.client().get("scheduler", "/v1/workloads", query)
    now = session.now()
    emit(rows, output, view=lambda r: ls_view(r, now=now))


WorkloadId = Annotated[str, typer.Argument(help="The workload (wl-...).")]


def describe(ctx: typer.Context, workload_id: WorkloadId, output: Output = Format.TABLE) -> None:
    """One workload in full."""
    client = session_of(ctx).client()
    emit(client.get("scheduler", f"/v1/workloads/{workload_id}"), output, view=describe_view)


def priority_view(p: dict[str, Any]) -> RenderableType:
    """Every term of the priority as sprio shows them: the value, its weighted part, where it comes from."""
    rows = [
        {"term": "urgency", "value": p["urgency"], "weighted": p["urgency_term"], "how": "0.6 * urgency"},
        {
            "term": "fair share",
            "value": p["fair_share"],
            "weighted": p["fair_share_term"],
            "how": f"0.4 * (1 - fair_share); used {p['decayed_usage_unit_hours']:.2f} of "
            f"{p['entitlement_unit_hours']:.2f} unit-hours, shares {p['shares']:g}/{p['total_shares']:g}",
        },
        {"term": "raw", "value": None, "weighted": p["raw"], "how": "sum of the terms"},
        {
            "term": "priority",
            "value": None,
            "weighted": p["priority"],
            "how": "kept from before its migration" if p["pinned"] else "min(raw, 1.0)",
        },
    ]
    columns = [
        Column("TERM", lambda r: r["term"]),
        Column("VALUE", lambda r: "" if r["value"] is None else f"{r['value']:.3f}", right=True),
        Column("WEIGHTED", lambda r: f"{r['weighted']:.3f}", right=True),
        Column("FROM", lambda r: r["how"], wrap=True),
    ]
    return Group(Text(f"{p['workload_id']}: {p['formula']}"), table(rows, columns))


def priority(ctx: typer.Context, workload_id: WorkloadId, output: Output = Format.TABLE) -> None:
    """Every term of a workload's priority, like sprio."""
    client = session_of(ctx).client()
    emit(client.get("scheduler", f"/v1/workloads/{workload_id}/priority"), output, view=priority_view)


def cancel(
    ctx: typer.Context,
    workload_ids: Annotated[list[str], typer.Argument(help="One or more workloads.")],
    output: Output = Format.TABLE,
) -> None:
    """Cancel one or more workloads.

    Each is tried; the first failure sets the exit code.
    """
    session = session_of(ctx)
    client = session.client()
    done: list[dict[str, Any]] = []
    failures: list[GpuctlError] = []
    for workload_id in workload_ids:
        try:
            done.append(client.post("scheduler", f"/v1/workloads/{workload_id}/cancel"))
        except GpuctlError as exc:
            failures.append(exc)
            sys.stderr.write(f"{workload_id}: {exc.line()}\n")
    if output is not Format.TABLE:
        emit(done, output)
    elif not session.quiet:
        for w in done:
            sys.stdout.write(f"{w['workload_id']} {w['state']}\n")
    if failures:
        raise typer.Exit(int(failures[0].exit_code))
