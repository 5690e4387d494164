"""Image catalog for creation step 1: the images offered and the versions users may pick."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["CatalogImage", "ImageCatalog"]


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
