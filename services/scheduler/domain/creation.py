"""Three-step creation (image -> resources -> network), as one request or as a draft filled step by step."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

import pydantic
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from services.scheduler.domain.catalog import ImageCatalog
from services.scheduler.domain.errors import ValidationError
from services.scheduler.domain.model import GangPolicy, ResourceRequest, Workload, WorkloadKind
from services.scheduler.domain.run import (
    DEFAULT_GRACE_S,
    Argv,
    CheckpointRequest,
    CpuMillis,
    Env,
    GraceSeconds,
    MemoryBytes,
    RunRequest,
    WorkingDir,
    run_size_problem,
)

__all__ = [
    "MAX_CONSTRAINTS",
    "MAX_NAME_CHARS",
    "MAX_TAGS",
    "MAX_TAG_KEY_CHARS",
    "MAX_TAG_VALUE_CHARS",
    "PROJECT_NAME_PATTERN",
    "PROJECT_NAME_RULE",
    "CreationDraft",
    "CreationOptions",
    "CreationSpec",
    "ImageStep",
    "NetworkStep",
    "Step",
    "apply_step",
    "complete_draft",
    "parse_spec",
    "run_json_of",
    "run_of",
    "to_workload",
]

_FROZEN = ConfigDict(frozen=True, extra="forbid")
_RESOURCE_TAGS = frozenset({"gpu", "mig", "units"})
Step = Literal["image", "resources", "network"]

# Bounds on what a tenant writes into a workload: every event about it carries them, so an unbounded tag
# once made one event larger than the broker takes and stalled every event behind it.
MAX_TAGS = 64
MAX_CONSTRAINTS = 32
MAX_TAG_KEY_CHARS = 63
MAX_TAG_VALUE_CHARS = 256
MAX_NAME_CHARS = 128
#: The project name rule (the same as ``libs.common.http.names``, which the domain may not import).
PROJECT_NAME_PATTERN = r"^[A-Za-z0-9._-]{1,63}$"
PROJECT_NAME_RULE = "1-63 characters, each an ASCII letter, a digit, '-', '_' or '.'"
_PROJECT_NAME = re.compile(PROJECT_NAME_PATTERN)
_PROJECT_TAG = "project"


def _printable(text: str) -> str:
    if not text.isprintable():
        raise ValueError("must not hold control or other non-printable characters")
    return text


def _refuse_inside(key: str, value: str, message: str) -> pydantic.ValidationError:
    """A validator's error located one level down (the tag, the field), so it names ``tags.project``."""
    error = {"type": "value_error", "loc": (key,), "input": value, "ctx": {"error": ValueError(message)}}
    return pydantic.ValidationError.from_exception_data(key, [error])  # type: ignore[list-item]


def _project_is_a_name(tags: dict[str, str]) -> dict[str, str]:
    project = tags.get(_PROJECT_TAG)
    if project is not None and not _PROJECT_NAME.fullmatch(project):
        raise _refuse_inside(_PROJECT_TAG, project, f"a project name is {PROJECT_NAME_RULE}")
    return tags


def _model_name_is_bounded(resources: ResourceRequest) -> ResourceRequest:
    model = getattr(resources, "model", None)
    if isinstance(model, str) and (len(model) > MAX_NAME_CHARS or not model.isprintable()):
        raise _refuse_inside("model", model, f"at most {MAX_NAME_CHARS} printable characters")
    return resources


TagKey = Annotated[str, Field(min_length=1, max_length=MAX_TAG_KEY_CHARS), AfterValidator(_printable)]
TagValue = Annotated[str, Field(max_length=MAX_TAG_VALUE_CHARS), AfterValidator(_printable)]
Tags = Annotated[
    dict[TagKey, TagValue],
    Field(
        max_length=MAX_TAGS,
        description=f"At most {MAX_TAGS} tags; keys 1-{MAX_TAG_KEY_CHARS} and values up to "
        f"{MAX_TAG_VALUE_CHARS} printable characters; 'project' is a project name ({PROJECT_NAME_PATTERN}).",
    ),
    AfterValidator(_project_is_a_name),
]
Constraints = Annotated[
    dict[TagKey, TagValue],
    Field(
        max_length=MAX_CONSTRAINTS,
        description=f"GPU labels that must match: at most {MAX_CONSTRAINTS}, bounded like tags.",
    ),
]
BoundedResources = Annotated[ResourceRequest, AfterValidator(_model_name_is_bounded)]
Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME_CHARS), AfterValidator(_printable)]


class ImageStep(BaseModel):
    """Step 1: an image from the catalog."""

    model_config = _FROZEN
    name: Name
    version: Name


class NetworkStep(BaseModel):
    """Step 3: where the workload's network interface lives."""

    model_config = _FROZEN
    vpc_id: str = Field(pattern=r"^vpc-[0-9a-z]{4,32}$")
    subnet_id: str = Field(pattern=r"^subnet-[0-9a-z]{4,32}$")
    security_group_id: str = Field(pattern=r"^sg-[0-9a-z]{4,32}$")
    public_ip: bool = False


class CreationOptions(BaseModel):
    """What a creation request says besides its three steps; each has a default."""

    model_config = _FROZEN
    kind: WorkloadKind = WorkloadKind.INSTANCE
    urgency: float = Field(default=0.5, ge=0.0, le=1.0)
    tags: Tags = Field(default_factory=dict)
    preemptible: bool = False
    time_limit_s: int | None = Field(default=None, ge=60, le=90 * 86400)
    gang: GangPolicy = GangPolicy.SAME_NODE
    constraints: Constraints = Field(default_factory=dict)
    command: Argv = Field(default_factory=list)
    args: Argv = Field(default_factory=list)
    env: Env = Field(default_factory=dict)
    working_dir: WorkingDir | None = None
    cpu_millis: CpuMillis | None = None
    memory_bytes: MemoryBytes | None = None
    grace_s: GraceSeconds = DEFAULT_GRACE_S
    checkpoint: CheckpointRequest | None = None


class CreationSpec(CreationOptions):
    """A complete, validated creation request."""

    image: ImageStep
    resources: BoundedResources
    network: NetworkStep


class CreationDraft(BaseModel):
    """A creation request being filled in step by step; options are given with the draft."""

    model_config = _FROZEN
    image: ImageStep | None = None
    resources: ResourceRequest | None = None
    network: NetworkStep | None = None
    options: dict[str, Any] = Field(default_factory=dict)


def _field_path(loc: tuple[int | str, ...]) -> str:
    parts = [
        str(p) for i, p in enumerate(loc) if not (i > 0 and loc[i - 1] == "resources" and p in _RESOURCE_TAGS)
    ]
    return ".".join(parts) or "body"


def _first_error(exc: pydantic.ValidationError, *, prefix: tuple[str, ...] = ()) -> ValidationError:
    error = exc.errors()[0]
    unknown = error["type"] == "extra_forbidden"
    message = f"unknown field {str(error['loc'][-1])!r}" if unknown else error["msg"]
    return ValidationError(field=_field_path((*prefix, *error["loc"])), message=message)


def _check_image(image: ImageStep, *, catalog: ImageCatalog) -> None:
    if image.name not in catalog.images:
        raise ValidationError(field="image.name", message=f"unknown image {image.name!r}")
    if not catalog.has(name=image.name, version=image.version):
        raise ValidationError(field="image.version", message=f"{image.name} has no version {image.version!r}")


def parse_spec(raw: Mapping[str, Any], *, catalog: ImageCatalog) -> CreationSpec:
    """Validate a one-shot creation request; the error names the first bad field."""
    try:
        spec = CreationSpec.model_validate(raw)
    except pydantic.ValidationError as exc:
        raise _first_error(exc) from None
    _check_image(spec.image, catalog=catalog)
    problem = run_size_problem(command=spec.command, args=spec.args, env=spec.env)
    if problem is not None:
        raise ValidationError(field=problem[0], message=problem[1])
    return spec


_STEP_MODELS: Mapping[str, type[BaseModel]] = {"image": ImageStep, "network": NetworkStep}


def _parse_step(*, step: Step, payload: Mapping[str, Any]) -> BaseModel:
    if step == "resources":
        adapter: pydantic.TypeAdapter[BaseModel] = pydantic.TypeAdapter(BoundedResources)
        return adapter.validate_python(payload)
    return _STEP_MODELS[step].model_validate(payload)


def apply_step(
    draft: CreationDraft, *, step: Step, payload: Mapping[str, Any], catalog: ImageCatalog
) -> CreationDraft:
    """Validate one step's payload and return the draft with that step filled in."""
    try:
        value = _parse_step(step=step, payload=payload)
    except pydantic.ValidationError as exc:
        raise _first_error(exc, prefix=(step,)) from None
    if isinstance(value, ImageStep):
        _check_image(value, catalog=catalog)
    return draft.model_copy(update={step: value})


def complete_draft(draft: CreationDraft, *, catalog: ImageCatalog) -> CreationSpec:
    """Turn a finished draft into a spec; a missing step is named as the bad field."""
    for step in ("image", "resources", "network"):
        if getattr(draft, step) is None:
            raise ValidationError(field=step, message="step not completed")
    raw = {**draft.options, "image": draft.image, "resources": draft.resources, "network": draft.network}
    return parse_spec(raw, catalog=catalog)


def to_workload(spec: CreationSpec, *, workload_id: str, tenant: str, now: datetime) -> Workload:
    """The workload a validated spec describes, submitted at `now`."""
    limit = timedelta(seconds=spec.time_limit_s) if spec.time_limit_s is not None else None
    return Workload(
        id=workload_id,
        tenant=tenant,
        kind=spec.kind,
        image=f"{spec.image.name}:{spec.image.version}",
        resources=spec.resources,
        urgency=spec.urgency,
        submitted_at=now,
        tags=spec.tags,
        preemptible=spec.preemptible,
        time_limit=limit,
        gang=spec.gang,
        constraints=spec.constraints,
    )


def run_of(spec: CreationSpec, *, catalog: ImageCatalog) -> RunRequest:
    """What a validated spec runs: its image resolved to the catalog's OCI reference, argv, env, limits."""
    return RunRequest(
        image=catalog.reference(name=spec.image.name, version=spec.image.version),
        command=tuple(spec.command),
        args=tuple(spec.args),
        env=dict(spec.env),
        working_dir=spec.working_dir,
        cpu_millis=spec.cpu_millis,
        memory_bytes=spec.memory_bytes,
        time_limit_s=float(spec.time_limit_s) if spec.time_limit_s is not None else None,
        grace_s=spec.grace_s,
        checkpoint=spec.checkpoint,
    )


def run_json_of(spec_json: Mapping[str, Any], *, catalog: ImageCatalog) -> dict[str, Any]:
    """``run_of(spec).model_dump(mode="json")`` from the spec's own JSON dump, without a model: what a job
    array stores for each of its thousands of items (a unit test holds the two equal)."""
    image, limit = spec_json["image"], spec_json["time_limit_s"]
    return {
        "image": catalog.reference(name=image["name"], version=image["version"]),
        "command": spec_json["command"],
        "args": spec_json["args"],
        "env": spec_json["env"],
        "working_dir": spec_json["working_dir"],
        "cpu_millis": spec_json["cpu_millis"],
        "memory_bytes": spec_json["memory_bytes"],
        "time_limit_s": float(limit) if limit is not None else None,
        "grace_s": float(spec_json["grace_s"]),
        "checkpoint": spec_json["checkpoint"],
    }
