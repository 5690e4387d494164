"""Loading the image catalog: the packaged images.yaml (beside this module), or an operator's file, parsed
into the domain model with any single references overridden."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from libs.common.gpu_models import catalog_text, model_names
from services.scheduler.domain.catalog import CatalogImage, ImageCatalog
from services.scheduler.domain.describe import GpuFacts, MigFacts
from services.scheduler.domain.gpu_models import GpuModels

__all__ = ["gpu_facts", "load_catalog", "load_default_catalog", "load_gpu_models", "parse_catalog"]


def parse_catalog(text: str) -> ImageCatalog:
    """Build a catalog from the YAML text of an images file."""
    raw = yaml.safe_load(text)["images"]
    images = {name: CatalogImage(name=name, **body) for name, body in raw.items()}
    return ImageCatalog(images=images)


def load_default_catalog() -> ImageCatalog:
    """Read the packaged images.yaml; called by the composition root, never at import time."""
    text = resources.files("services.scheduler.adapters").joinpath("images.yaml").read_text(encoding="utf-8")
    return parse_catalog(text)


def load_catalog(*, file: Path | None, references: Mapping[str, str]) -> ImageCatalog:
    """The catalog of ``file`` (None: the packaged one), with ``references`` ("name:version" -> OCI
    reference) resolved instead of the file's; ValueError naming a reference no image version has."""
    catalog = load_default_catalog() if file is None else parse_catalog(file.read_text(encoding="utf-8"))
    return catalog.with_references(references) if references else catalog


def load_gpu_models() -> GpuModels:
    """The platform's GPU model names and aliases (libs/common/gpu_catalog.yaml)."""
    return GpuModels(names=model_names())


@cache
def gpu_facts() -> tuple[GpuFacts, ...]:
    """The shared GPU catalogue (libs/common/gpu_catalog.yaml) as the describe reader needs it."""
    raw: dict[str, Any] = yaml.safe_load(catalog_text())
    return tuple(
        GpuFacts(
            name=str(m["name"]),
            memory_gb=int(m["memory_gb"]),
            aliases=tuple(str(a) for a in m.get("aliases", ())),
            mig=tuple(_mig(p) for p in m.get("mig_profiles") or ()),
        )
        for m in raw["models"]
    )


def _mig(raw: dict[str, Any]) -> MigFacts:
    return MigFacts(
        name=str(raw["name"]), memory_gb=int(raw["memory_gb"]), compute_slices=int(raw["compute_slices"])
    )
