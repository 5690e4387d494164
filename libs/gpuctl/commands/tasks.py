"""task run and task get: submit a job and wait for its result (exit code, log tail, outputs).

The exit status is the job's own once it ended (128 + the signal that killed it, 1 when it never ran),
and 124 when it did not end within ``--wait``, as timeout(1) says.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer
from rich.console import Group, RenderableType

from libs.gpuctl.client import ApiClient
from libs.gpuctl.commands import _spec as spec
from libs.gpuctl.commands._options import Tenant, parse_duration
from libs.gpuctl.commands.results import outputs_view, write_log
from libs.gpuctl.commands.workloads import exit_text
from libs.gpuctl.render import Format, Output, emit, fields, show
from libs.gpuctl.session import Session, session_of

__all__ = ["TIMED_OUT", "exit_status", "register", "result_view"]

app = typer.Typer(help="Submit a job, get its result.", no_args_is_help=True)
#: The exit status of a task that did not end within the wait (timeout(1)'s).
TIMED_OUT = 124
#: The longest one request waits: the client's read timeout is 30 s; longer waits are asked in rounds.
_ROUND_S = 25.0
#: The submitting request's wait: it also submits and reads the result, so it waits less than a round.
_FIRST_ROUND_S = 15.0
_ENDED = frozenset({"completed", "failed", "cancelled"})
Wait = Annotated[
    str, typer.Option("--wait", metavar="DURATION", help="How long to wait for the end: 60, 90s, 5m, 1h.")
]


def register(root: typer.Typer) -> None:
    """Add the task group."""
    root.add_typer(app, name="task")


def exit_status(task: dict[str, Any]) -> int:
    """What ``$?`` says of a task: its exit code, 128 + its signal, 124 while it runs, else 1 or 0."""
    if task.get("state") not in _ENDED:
        return TIMED_OUT
    if task.get("exit_code") is not None:
        return int(task["exit_code"])
    if task.get("signal") is not None:
        return 128 + int(task["signal"])
    return 0 if task.get("state") == "completed" else 1


def _exit_text(task: dict[str, Any]) -> str:
    exited = {"reason": task.get("exit_reason") or task["state"], "code": task.get("exit_code")}
    return exit_text(exited | {"signal": task.get("signal")})


def result_view(task: dict[str, Any]) -> RenderableType:
    """The task's id, state, how it exited and why, then its outputs (the log tail is printed before)."""
    summary = fields(
        [
            ("Task", task["workload_id"]),
            ("State", task["state"]),
            ("Exit", _exit_text(task) if task["state"] in _ENDED else "-"),
            ("Reason", task.get("reason")),
        ]
    )
    if task.get("outputs") is None:
        return summary
    manifest = {"files": task["outputs"], "total_bytes": sum(f.get("size", 0) for f in task["outputs"])}
    return Group(summary, outputs_view(manifest | {"placement_id": "last"}))


def _waited(client: ApiClient, task: dict[str, Any], *, left: float) -> dict[str, Any]:
    """Ask again, a round at a time, until the task ended or ``left`` seconds were waited."""
    while task.get("state") not in _ENDED and left > 0:
        asked = min(left, _ROUND_S)
        task = client.get("scheduler", f"/v1/tasks/{task['workload_id']}", {"wait_s": asked})
        left -= asked
    return task


def _report(session: Session, task: dict[str, Any], output: Output, *, waited: str) -> None:
    if output is not Format.TABLE:
        emit(task, output)
    else:
        if task.get("log_tail"):
            write_log(task["log_tail"] if task["log_tail"].endswith("\n") else task["log_tail"] + "\n")
        if not session.quiet:
            show(result_view(task))
    if task.get("state") not in _ENDED:
        sys.stderr.write(
            f"{task['workload_id']} did not end within {waited} (state {task['state']}); "
            f"gpuctl task get {task['workload_id']} --wait 5m waits more\n"
        )
    raise typer.Exit(exit_status(task))


@app.command("run")
def run(
    ctx: typer.Context,
    image: spec.Image = None,
    gpu: spec.Gpu = None,
    mig: spec.Mig = None,
    units: spec.Units = None,
    vpc: spec.Vpc = None,
    subnet: spec.Subnet = None,
    sg: spec.SecurityGroup = None,
    urgency: spec.Urgency = None,
    tag: spec.Tag = None,
    constraint: spec.Constraint = None,
    preemptible: spec.Preemptible = None,
    time_limit: spec.TimeLimit = None,
    command: spec.Command = None,
    env: spec.Env = None,
    workdir: spec.Workdir = None,
    cpu: spec.Cpu = None,
    memory: spec.Memory = None,
    grace: spec.Grace = None,
    argv: spec.Argv = None,
    wait: Wait = "60s",
    tenant: Tenant = None,
    output: Output = Format.TABLE,
) -> None:
    """Run a job and wait for its result: exit code, log tail, outputs.

    The exit status is the job's; 124 when it did not end within --wait.
    """
    session = session_of(ctx)
    left = parse_duration(wait, field="wait").total_seconds()
    flags = spec.SpecFlags(
        image=image, gpu=gpu, mig=mig, units=units, vpc=vpc, subnet=subnet, sg=sg, kind="job",
        urgency=urgency, tag=tag, constraint=constraint, preemptible=preemptible, time_limit=time_limit,
        command=command, argv=argv, env=env, workdir=workdir, cpu=cpu, memory=memory, grace=grace,
    )  # fmt: skip
    body = flags.body({}) | {"wait_s": min(left, _FIRST_ROUND_S)}
    client = session.client()
    task = client.post("scheduler", "/v1/tasks", json=body, params={"tenant_id": tenant})
    session.note(f"{task['workload_id']} submitted")
    task = _waited(client, task, left=left - body["wait_s"])
    _report(session, task, output, waited=wait)


@app.command("get")
def get(
    ctx: typer.Context,
    workload_id: Annotated[str, typer.Argument(help="The task's workload (wl-...).")],
    wait: Wait = "0",
    output: Output = Format.TABLE,
) -> None:
    """A task's result, waiting up to --wait for it to end (exit status as task run's)."""
    session = session_of(ctx)
    left = parse_duration(wait, field="wait").total_seconds()
    client = session.client()
    task = client.get("scheduler", f"/v1/tasks/{workload_id}", {"wait_s": min(left, _ROUND_S)})
    task = _waited(client, task, left=left - min(left, _ROUND_S))
    _report(session, task, output, waited=wait)
