"""create: an instance in three steps (image, resources, network) through a draft, by flags or by prompts.

Each step goes to the scheduler as it is filled, so a bad one is refused with its field before the next
is asked. In a terminal, a step with no flag is asked for: the images to choose from, the GPU the
scheduler recommends for that image as the default, then the network. Off a terminal a missing step is a
usage error (exit 2) naming its flag.
"""

from __future__ import annotations

from typing import Any

import typer
from rich.prompt import Prompt

from libs.gpuctl.client import ApiClient
from libs.gpuctl.commands import _spec as spec
from libs.gpuctl.commands._options import Tenant, usage
from libs.gpuctl.commands.workloads import show_created
from libs.gpuctl.render import Format, Output, console
from libs.gpuctl.session import Session, session_of

__all__ = ["register"]

_NETWORK = (("vpc_id", "--vpc", "VPC id (vpc-...)"), ("subnet_id", "--subnet", "subnet id (subnet-...)"),
            ("security_group_id", "--sg", "security group id (sg-...)"))  # fmt: skip


def register(root: typer.Typer) -> None:
    """Add create."""
    root.command()(create)


def _missing(session: Session, flag: str) -> None:
    if not session.interactive():
        raise usage(f"missing {flag} (or run in a terminal to be asked)", field=flag.lstrip("-"))


def _require_flags(session: Session, flags: spec.SpecFlags) -> None:
    """Off a terminal, every step must come from flags: checked before the draft is opened."""
    if session.interactive():
        return
    if flags.image_step() is None:
        _missing(session, "--image")
    if flags.resources_step() is None:
        _missing(session, "--gpu, --mig or --units")
    network = flags.network_step() or {}
    for key, flag, _ in _NETWORK:
        if key not in network:
            _missing(session, flag)


def _ask_image(session: Session, client: ApiClient) -> dict[str, str]:
    _missing(session, "--image")
    images = client.get("scheduler", "/v1/images")
    choices = [f"{i['name']}:{v}" for i in images for v in i["versions"]]
    if not choices:
        raise usage("the scheduler lists no images", field="image")
    default = f"{images[0]['name']}:{images[0]['versions'][-1]}"
    return spec.parse_image(Prompt.ask("Step 1/3 image", choices=choices, default=default, console=console()))


def _framework(client: ApiClient, image: dict[str, str]) -> str | None:
    for known in client.get("scheduler", "/v1/images"):
        if known["name"] == image["name"]:
            return str(known["framework"])
    return None


def _ask_resources(session: Session, client: ApiClient, image: dict[str, str]) -> dict[str, Any]:
    _missing(session, "--gpu, --mig or --units")
    rec = client.get("scheduler", "/v1/recommendations/gpu", {"framework": _framework(client, image)})
    out = console()
    out.print(f"recommended: {rec['count']}x {rec['model']}")
    for reason in rec.get("reasons") or []:
        out.print(f"  - {reason}")
    text = Prompt.ask(
        "Step 2/3 resources (MODEL:COUNT, mig:PROFILE[@MODEL] or units:N)",
        default=f"{rec['model']}:{rec['count']}",
        console=out,
    )
    kind, _, rest = text.partition(":")
    if kind == "mig":
        return spec.parse_resources(gpu=None, mig=rest, units=None) or {}
    if kind == "units":
        try:
            return {"kind": "units", "units": float(rest)}
        except ValueError:
            raise usage(f"{rest!r} is not a number of units", field="units") from None
    return spec.parse_resources(gpu=text, mig=None, units=None) or {}


def _network(session: Session, given: dict[str, Any] | None) -> dict[str, Any]:
    network = dict(given or {})
    for key, flag, label in _NETWORK:
        if key not in network:
            _missing(session, flag)
            network[key] = Prompt.ask(f"Step 3/3 {label}", console=console())
    return network


def create(
    ctx: typer.Context,
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
    tenant: Tenant = None,
    output: Output = Format.TABLE,
) -> None:
    """Create an instance in 3 steps: image, resources, network.

    In a terminal, a step without its flags is asked for, with the recommended GPU as default.
    """
    session = session_of(ctx)
    client = session.client()
    flags = spec.SpecFlags(
        image=image, gpu=gpu, mig=mig, units=units, vpc=vpc, subnet=subnet, sg=sg, public_ip=public_ip,
        kind=kind, urgency=urgency, tag=tag, constraint=constraint, preemptible=preemptible,
        time_limit=time_limit, gang=gang, command=command, argv=argv, env=env, workdir=workdir, cpu=cpu,
        memory=memory, grace=grace,
    )  # fmt: skip
    _require_flags(session, flags)
    draft = client.post(
        "scheduler", "/v1/workloads/drafts", json={"options": flags.options()}, params={"tenant_id": tenant}
    )
    path = f"/v1/workloads/drafts/{draft['draft_id']}"
    image_step = flags.image_step() or _ask_image(session, client)
    client.put("scheduler", f"{path}/image", json=image_step)
    session.note(f"step 1/3 image {image_step['name']}:{image_step['version']}: ok")
    resources = flags.resources_step() or _ask_resources(session, client, image_step)
    client.put("scheduler", f"{path}/resources", json=resources)
    session.note("step 2/3 resources: ok")
    client.put("scheduler", f"{path}/network", json=_network(session, flags.network_step()))
    session.note("step 3/3 network: ok")
    show_created(client.post("scheduler", f"{path}/submit"), output, quiet=session.quiet)
