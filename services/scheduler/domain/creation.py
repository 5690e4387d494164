"""Three-step creation (image -> resources -> network), as one request or as a draft filled step by step."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field

from services.scheduler.domain.catalog import ImageCatalog
from services.scheduler.domain.errors import ValidationError
from services.scheduler.domain.model import GangPolicy, ResourceRequest, Workload, WorkloadKind

__all__ = [
    "CreationDraft",
    "CreationSpec",
    "ImageStep",
    "NetworkStep",
    "Step",
    "apply_step",
    "complete_draft",
    "parse_spec",
    "to_workload",
]

_FROZEN = ConfigDict(frozen=True, extra="forbid")
_RESOURCE_TAGS = frozenset({"gpu", "mig", "units"})
Step = Literal["image", "resources", "network"]


class ImageStep(BaseModel):
    """Step 1: an image from the catalog."""

    model_config = _FROZEN
    name: str = Field(min_length=1)
    version: str = Field(min_length=1)


class NetworkStep(BaseModel):
    """Step 3: where the workload's network interface lives."""

    model_config = _FROZEN
    vpc_id: str = Field(pattern=r"^vpc-[0-9a-z]{4,32}$")
    subnet_id: str = Field(pattern=r"^subnet-[0-9a-z]{4,32}$")
    security_group_id: str = Field(pattern=r"^sg-[0-9a-z]{4,32}$")
    public_ip: bool = False


class CreationSpec(BaseModel):
    """A complete, validated creation request."""

    model_config = _FROZEN
    kind: WorkloadKind = WorkloadKind.INSTANCE
    image: ImageStep
    resources: ResourceRequest
    network: NetworkStep
    urgency: float = Field(default=0.5, ge=0.0, le=1.0)
    tags: dict[str, str] = Field(default_factory=dict)
    preemptible: bool = False
    time_limit_s: int | None = Field(default=None, ge=60, le=90 * 86400)
    gang: GangPolicy = GangPolicy.SAME_NODE
    constraints: dict[str, str] = Field(default_factory=dict)


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
    return ValidationError(field=_field_path((*prefix, *error["loc"])), message=error["msg"])


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
    return spec


_STEP_MODELS: Mapping[str, type[BaseModel]] = {"image": ImageStep, "network": NetworkStep}


def _parse_step(*, step: Step, payload: Mapping[str, Any]) -> BaseModel:
    if step == "resources":
        adapter: pydantic.TypeAdapter[BaseModel] = pydantic.TypeAdapter(ResourceRequest)
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
