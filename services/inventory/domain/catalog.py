"""GPU model catalog: datasheet facts and MIG profiles (loaded by adapters.catalog_yaml)."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from decimal import Decimal
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from services.inventory.domain.errors import MigNotSupportedError, UnknownModelError

__all__ = [
    "COMPUTE_SLICES",
    "MEMORY_SLICES",
    "Catalog",
    "GpuModel",
    "MigProfile",
    "parse_catalog",
]

# Every MIG-capable GPU so far (A100, H100, H200) splits into 7 compute and 8 memory slices.
COMPUTE_SLICES = 7
MEMORY_SLICES = 8

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class MigProfile(BaseModel):
    """One GPU-instance profile: its slice counts and the memory slices it may start at."""

    model_config = _FROZEN

    name: str = Field(description="NVIDIA profile name, e.g. 3g.40gb")
    compute_slices: int = Field(ge=1, le=COMPUTE_SLICES)
    memory_slices: int = Field(ge=1, le=MEMORY_SLICES)
    memory_gb: int = Field(gt=0, description="memory of one instance, as in the profile name")
    max_instances: int = Field(ge=1, description="NVIDIA's stated instance limit per GPU")
    placements: tuple[int, ...] = Field(min_length=1, description="allowed start memory slices")

    @model_validator(mode="after")
    def _placements_fit(self) -> MigProfile:
        for start in self.placements:
            if start < 0 or start + self.memory_slices > MEMORY_SLICES:
                raise ValueError(f"{self.name}: placement {start} runs past memory slice {MEMORY_SLICES}")
        return self


class GpuModel(BaseModel):
    """Datasheet facts of one GPU model; tensor TFLOPS are dense (no sparsity)."""

    model_config = _FROZEN

    name: str
    aliases: tuple[str, ...] = ()
    architecture: str
    memory_gb: int = Field(gt=0)
    memory_bandwidth_gbps: Decimal = Field(gt=0)
    fp16_dense_tflops: Decimal = Field(gt=0)
    bf16_dense_tflops: Decimal | None = None
    fp32_tflops: Decimal = Field(gt=0)
    tensor_core_generation: int | None = None
    nvlink_gbps: Decimal | None = None
    source: str = Field(description="key into the catalog's sources: where the figures come from")
    mig_profiles: tuple[MigProfile, ...] = ()

    @property
    def tensor_cores(self) -> bool:
        return self.tensor_core_generation is not None

    @property
    def nvlink(self) -> bool:
        return self.nvlink_gbps is not None

    @property
    def mig_supported(self) -> bool:
        return bool(self.mig_profiles)

    @property
    def memory_mib(self) -> int:
        return self.memory_gb * 1024

    @property
    def dense_16bit_tflops(self) -> Decimal:
        """BF16 where the architecture has it, else FP16: the tensor rate training actually uses."""
        return self.bf16_dense_tflops if self.bf16_dense_tflops is not None else self.fp16_dense_tflops

    def mig_profile(self, name: str) -> MigProfile:
        """Return the named MIG profile of this model, or raise if MIG or the profile is missing."""
        if not self.mig_supported:
            raise MigNotSupportedError(f"{self.name} does not support MIG")
        for profile in self.mig_profiles:
            if profile.name == name:
                return profile
        known = ", ".join(p.name for p in self.mig_profiles)
        raise MigNotSupportedError(f"{self.name} has no MIG profile {name!r}; profiles: {known}")


class Catalog(BaseModel):
    """All known GPU models, looked up by canonical name or alias (case-insensitive)."""

    model_config = _FROZEN

    version: int
    sources: dict[str, str]
    models: tuple[GpuModel, ...]

    @model_validator(mode="after")
    def _consistent(self) -> Catalog:
        seen: set[str] = set()
        for model in self.models:
            if model.source not in self.sources:
                raise ValueError(f"{model.name}: source {model.source!r} is not listed in sources")
            for key in (model.name, *model.aliases):
                if key.casefold() in seen:
                    raise ValueError(f"model name or alias {key!r} is used twice")
                seen.add(key.casefold())
        return self

    # Lookups and derived values are asked for per GPU on every discovery: index and memoise them.
    _index: dict[str, GpuModel] = PrivateAttr(default_factory=dict)
    _memo: dict[Hashable, Any] = PrivateAttr(default_factory=dict)

    def model_post_init(self, context: Any, /) -> None:
        self._index = {key.casefold(): m for m in self.models for key in (m.name, *m.aliases)}

    def __eq__(self, other: object) -> bool:
        # The memo is a cache, not part of the catalog's value.
        if not isinstance(other, Catalog):
            return NotImplemented
        return (self.version, self.sources, self.models) == (other.version, other.sources, other.models)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(model.name for model in self.models)

    def get(self, model: str) -> GpuModel:
        """Return the model named `model` (name or alias); raise UnknownModelError otherwise."""
        # Read the private dict directly: pydantic's __getattr__ for private attributes is slow.
        private = self.__pydantic_private__ or {}
        found: GpuModel | None = private["_index"].get(model.strip().casefold())
        if found is None:
            raise UnknownModelError(model=model, known=self.names)
        return found

    def memo(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """A value derived from this (immutable) catalog, computed once per key."""
        memo: dict[Hashable, Any] = (self.__pydantic_private__ or {})["_memo"]
        if key not in memo:
            memo[key] = compute()
        return memo[key]


def parse_catalog(*, data: dict[str, Any]) -> Catalog:
    """Validate an already-parsed catalog document."""
    return Catalog.model_validate(data)
