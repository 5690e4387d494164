"""Image catalog for creation step 1: the images offered, the versions users may pick, and the OCI
reference each version resolves to (what the node agent pulls or runs)."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["CatalogImage", "ImageCatalog"]


class CatalogImage(BaseModel):
    """One image family, the versions users may pick and the OCI reference of each."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    framework: str
    versions: tuple[str, ...] = Field(min_length=1)
    references: Mapping[str, str] = Field(description="version -> OCI image reference")

    @model_validator(mode="after")
    def _every_version_resolves(self) -> CatalogImage:
        missing = [v for v in self.versions if not self.references.get(v)]
        extra = sorted(set(self.references) - set(self.versions))
        if missing or extra:
            raise ValueError(
                f"image {self.name!r}: every version needs one reference "
                f"(without one: {missing}; not a version: {extra})"
            )
        return self


class ImageCatalog(BaseModel):
    """All images offered, by name."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    images: Mapping[str, CatalogImage]

    def has(self, *, name: str, version: str) -> bool:
        """Whether `name:version` is offered."""
        image = self.images.get(name)
        return image is not None and version in image.versions

    def reference(self, *, name: str, version: str) -> str:
        """The OCI reference `name:version` resolves to (KeyError when it is not offered)."""
        if not self.has(name=name, version=version):
            raise KeyError(f"{name}:{version}")
        return self.images[name].references[version]

    def with_references(self, overrides: Mapping[str, str]) -> ImageCatalog:
        """The catalog with some ``name:version`` resolved elsewhere (a mirror, a pinned digest);
        ValueError naming an override that is no offered image version."""
        images = dict(self.images)
        for key, ref in overrides.items():
            name, _, version = key.partition(":")
            if not self.has(name=name, version=version) or not ref:
                raise ValueError(f"image reference override {key!r}: no such image version in the catalog")
            image = images[name]
            images[name] = image.model_copy(update={"references": {**image.references, version: ref}})
        return ImageCatalog(images=images)
