"""The flags of a creation request (create and submit share them) and the JSON body they make.

The three steps are ``--image NAME:VERSION``, one of ``--gpu MODEL[:COUNT]``, ``--mig PROFILE[@MODEL]``
or ``--units N``, and ``--vpc``/``--subnet``/``--sg``; the rest are the request's options. The scheduler
validates the result; these parsers only catch what cannot be a request at all (exit 2).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

import typer

from libs.gpuctl.commands._options import parse_duration, parse_pairs, usage

__all__ = [
    "Constraint",
    "Gang",
    "Gpu",
    "Image",
    "Kind",
    "Mig",
    "Preemptible",
    "PublicIp",
    "SecurityGroup",
    "SpecFlags",
    "Subnet",
    "Tag",
    "TimeLimit",
    "Units",
    "Urgency",
    "Vpc",
    "parse_image",
    "parse_resources",
]

Image = Annotated[str | None, typer.Option(metavar="NAME:VER", help="Step 1: image, e.g. pytorch:2.3.")]
Gpu = Annotated[str | None, typer.Option(metavar="MODEL[:N]", help="Step 2: whole GPUs, e.g. L4:2.")]
Mig = Annotated[str | None, typer.Option(metavar="PROFILE[@MODEL]", help="Step 2: a MIG instance.")]
Units = Annotated[float | None, typer.Option(metavar="N", help="Step 2: compute units.")]
Vpc = Annotated[str | None, typer.Option(metavar="vpc-ID", help="Step 3: the VPC.")]
Subnet = Annotated[str | None, typer.Option(metavar="subnet-ID", help="Step 3: the subnet.")]
SecurityGroup = Annotated[str | None, typer.Option("--sg", metavar="sg-ID", help="Step 3: security group.")]
PublicIp = Annotated[bool | None, typer.Option("--public-ip", help="Step 3: with a public IP.")]
Kind = Annotated[str | None, typer.Option(metavar="KIND", help="instance or job.")]
Urgency = Annotated[float | None, typer.Option(metavar="0..1", help="Weighs 0.6 in the priority.")]
Tag = Annotated[list[str] | None, typer.Option(metavar="K=V", help="A tag (repeatable); project=P bills P.")]
Constraint = Annotated[list[str] | None, typer.Option(metavar="K=V", help="A GPU label that must match.")]
Preemptible = Annotated[bool | None, typer.Option("--preemptible", help="May be preempted.")]
TimeLimit = Annotated[str | None, typer.Option(metavar="DURATION", help="At most this long: 90m, 2h, 3d.")]
Gang = Annotated[str | None, typer.Option(metavar="POLICY", help="same_node or all_or_nothing.")]


def parse_image(text: str) -> dict[str, str]:
    """``pytorch:2.3`` as the image step."""
    name, sep, version = text.partition(":")
    if not sep or not name or not version:
        raise usage(f"{text!r}: give the image as NAME:VERSION, e.g. pytorch:2.3", field="image")
    return {"name": name, "version": version}


def parse_resources(*, gpu: str | None, mig: str | None, units: float | None) -> dict[str, Any] | None:
    """The resources step from whichever of --gpu, --mig and --units was given (at most one)."""
    given = [
        flag for flag, value in (("--gpu", gpu), ("--mig", mig), ("--units", units)) if value is not None
    ]
    if len(given) > 1:
        raise usage(f"give one of --gpu, --mig and --units, not {' and '.join(given)}", field="resources")
    if gpu is not None:
        model, _, count = gpu.partition(":")
        if not model or (count and not count.isdigit()):
            raise usage(f"{gpu!r}: give whole GPUs as MODEL[:COUNT], e.g. A100-80GB:2", field="resources")
        return {"kind": "gpu", "model": model, "count": int(count or 1)}
    if mig is not None:
        profile, _, model = mig.partition("@")
        return {"kind": "mig", "profile": profile, **({"model": model} if model else {})}
    if units is not None:
        return {"kind": "units", "units": units}
    return None


@dataclass(frozen=True)
class SpecFlags:
    """Every flag of a creation request as given (None: not given)."""

    image: str | None = None
    gpu: str | None = None
    mig: str | None = None
    units: float | None = None
    vpc: str | None = None
    subnet: str | None = None
    sg: str | None = None
    public_ip: bool | None = None
    kind: str | None = None
    urgency: float | None = None
    tag: list[str] | None = None
    constraint: list[str] | None = None
    preemptible: bool | None = None
    time_limit: str | None = None
    gang: str | None = None

    def image_step(self) -> dict[str, str] | None:
        """Step 1, if given."""
        return parse_image(self.image) if self.image is not None else None

    def resources_step(self) -> dict[str, Any] | None:
        """Step 2, if given."""
        return parse_resources(gpu=self.gpu, mig=self.mig, units=self.units)

    def network_step(self) -> dict[str, Any] | None:
        """Step 3 as far as given (None when no network flag was)."""
        given = {"vpc_id": self.vpc, "subnet_id": self.subnet, "security_group_id": self.sg}
        step: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
        if self.public_ip is not None:
            step["public_ip"] = self.public_ip
        return step or None

    def options(self) -> dict[str, Any]:
        """The request's options that were given."""
        out: dict[str, Any] = {
            "kind": self.kind,
            "urgency": self.urgency,
            "preemptible": self.preemptible,
            "gang": self.gang,
        }
        if self.tag:
            out["tags"] = parse_pairs(self.tag, field="tag")
        if self.constraint:
            out["constraints"] = parse_pairs(self.constraint, field="constraint")
        if self.time_limit is not None:
            out["time_limit_s"] = int(parse_duration(self.time_limit, field="time_limit").total_seconds())
        return {k: v for k, v in out.items() if v is not None}

    def body(self, base: dict[str, Any]) -> dict[str, Any]:
        """A one-shot request: ``base`` (a spec file) with every given flag laid over it."""
        body = {**base, **self.options()}
        for key in ("tags", "constraints"):
            if key in base and key in self.options():
                body[key] = {**base[key], **self.options()[key]}
        for key, step in (("image", self.image_step()), ("resources", self.resources_step())):
            if step is not None:
                body[key] = step
        network = self.network_step()
        if network is not None:
            body["network"] = {**(base.get("network") or {}), **network}
        return body
