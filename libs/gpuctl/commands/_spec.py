"""The flags of a creation request (create and submit share them) and the JSON body they make.

The three steps are ``--image NAME:VERSION``, one of ``--gpu MODEL[:COUNT]``, ``--mig PROFILE[@MODEL]``
or ``--units N``, and ``--vpc``/``--subnet``/``--sg``; the rest are the request's options, what runs among
them (``--command`` or ``-- CMD ARG...``, ``--env``, ``--workdir``, ``--cpu``, ``--memory``, ``--grace``). The
scheduler validates the result; these parsers only catch what cannot be a request at all (exit 2).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Annotated, Any

import typer

from libs.gpuctl.commands._options import parse_duration, parse_pairs, usage

__all__ = [
    "Argv",
    "Command",
    "Constraint",
    "Cpu",
    "Env",
    "Gang",
    "Gpu",
    "Grace",
    "Image",
    "Kind",
    "Memory",
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
    "Workdir",
    "parse_cpu",
    "parse_image",
    "parse_memory",
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
Command = Annotated[
    str | None, typer.Option(metavar="CMD", help="What runs, split as a shell would: 'python train.py'.")
]
Argv = Annotated[
    list[str] | None,
    typer.Argument(
        metavar="[-- CMD [ARG]...]", help="What runs, word for word, after '--'.", show_default=False
    ),
]
Env = Annotated[list[str] | None, typer.Option(metavar="K=V", help="An environment variable (repeatable).")]
Workdir = Annotated[str | None, typer.Option(metavar="PATH", help="Absolute working directory.")]
Cpu = Annotated[
    str | None, typer.Option(metavar="CORES", help="CPU limit: cores (1.5) or millicores (1500m).")
]
Memory = Annotated[
    str | None, typer.Option(metavar="SIZE", help="Host memory limit: 16Gi, 512Mi, 2G or bytes.")
]
Grace = Annotated[str | None, typer.Option(metavar="DURATION", help="SIGTERM to SIGKILL on cancel: 30s.")]

_CPU = re.compile(r"(\d+)m|(\d+(?:\.\d{1,3})?)")
_MEMORY = re.compile(r"(\d+)(Ki|Mi|Gi|Ti|K|M|G|T)?")
_MEMORY_UNITS = {
    None: 1,
    "K": 1000,
    "M": 1000**2,
    "G": 1000**3,
    "T": 1000**4,
    "Ki": 1024,
    "Mi": 1024**2,
    "Gi": 1024**3,
    "Ti": 1024**4,
}


def parse_cpu(text: str) -> int:
    """``1.5`` cores or ``1500m`` as millicores."""
    match = _CPU.fullmatch(text.strip())
    if match is None:
        raise usage(f"{text!r}: give CPU as cores (1.5) or millicores (1500m)", field="cpu_millis")
    millis, cores = match.groups()
    return int(millis) if millis is not None else round(float(cores) * 1000)


def parse_memory(text: str) -> int:
    """``16Gi``, ``512Mi``, ``2G`` or plain bytes as bytes."""
    match = _MEMORY.fullmatch(text.strip())
    if match is None:
        raise usage(f"{text!r}: give memory as 16Gi, 512Mi, 2G or bytes", field="memory_bytes")
    return int(match.group(1)) * _MEMORY_UNITS[match.group(2)]


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
    command: str | None = None
    argv: list[str] | None = None
    env: list[str] | None = None
    workdir: str | None = None
    cpu: str | None = None
    memory: str | None = None
    grace: str | None = None

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
        return {k: v for k, v in (out | self._run()).items() if v is not None}

    def _run(self) -> dict[str, Any]:
        """What runs, as far as given."""
        out: dict[str, Any] = {
            "command": self._command(),
            "working_dir": self.workdir,
            "cpu_millis": None if self.cpu is None else parse_cpu(self.cpu),
            "memory_bytes": None if self.memory is None else parse_memory(self.memory),
        }
        if self.env:
            out["env"] = parse_pairs(self.env, field="env")
        if self.grace is not None:
            out["grace_s"] = parse_duration(self.grace, field="grace_s").total_seconds()
        return out

    def _command(self) -> list[str] | None:
        if self.command is not None and self.argv:
            raise usage("give the command as --command or after '--', not both", field="command")
        if self.argv:
            return list(self.argv)
        if self.command is None:
            return None
        try:
            return shlex.split(self.command)
        except ValueError as exc:
            raise usage(f"--command {self.command!r}: {exc}", field="command") from None

    def body(self, base: dict[str, Any]) -> dict[str, Any]:
        """A one-shot request: ``base`` (a spec file) with every given flag laid over it."""
        body = {**base, **self.options()}
        for key in ("tags", "constraints", "env"):
            if key in base and key in self.options():
                body[key] = {**base[key], **self.options()[key]}
        for key, step in (("image", self.image_step()), ("resources", self.resources_step())):
            if step is not None:
                body[key] = step
        network = self.network_step()
        if network is not None:
            body["network"] = {**(base.get("network") or {}), **network}
        return body
