"""Image catalog for creation step 1; parsing is pure, loading the packaged file is the one IO helper."""

from __future__ import annotations

from collections.abc import Mapping
from importlib import resources

import yaml
from pydantic import BaseModel, ConfigDict, Field

__all__ = ["CatalogImage", "ImageCatalog", "load_default_catalog", "parse_catalog"]


class CatalogImage(BaseModel):
    """One image family and the versions users may pick."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    framework: str
    versions: tuple[str, ...] = Field(min_length=1)


class ImageCatalog(BaseModel):
    """All images offered, by name."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    images: Mapping[str, CatalogImage]

    def has(self, *, name: str, version: str) -> bool:
        """Whether `name:version` is offered."""
        image = self.images.get(name)
        return image is not None and version in image.versions


def parse_catalog(text: str) -> ImageCatalog:
    """Build a catalog from the YAML text of an images file."""
    raw = yaml.safe_load(text)["images"]
    images = {name: CatalogImage(name=name, **body) for name, body in raw.items()}
    return ImageCatalog(images=images)


def load_default_catalog() -> ImageCatalog:
    """Read the packaged images.yaml; called by the composition root, never at import time."""
    text = resources.files("services.scheduler").joinpath("images.yaml").read_text(encoding="utf-8")
    return parse_catalog(text)
