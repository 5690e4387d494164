"""The fleet description a simulated fleet is built from (a fleet file parses into this)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from services.telemetry.domain.gpu_models import GPU_MODELS

__all__ = ["FleetSpec", "GpuGroup", "NodeSpec"]


class GpuGroup(BaseModel):
    """Some GPUs of one model on a node."""

    model_config = ConfigDict(frozen=True)
    model: str = Field(description="Key of GPU_MODELS, e.g. H100")
    count: int = Field(ge=1, le=64, description="How many of them")
    catalog_model: str | None = Field(
        default=None, description="Inventory catalog name as the fleet file says"
    )
    mig: tuple[str, ...] = Field(default=(), description="MIG profiles from the fleet file, e.g. 3g.40gb@4")

    @field_validator("model")
    @classmethod
    def _known_model(cls, value: str) -> str:
        if value not in GPU_MODELS:
            raise ValueError(f"unknown GPU model {value!r}; known: {', '.join(GPU_MODELS)}")
        return value


class NodeSpec(BaseModel):
    """One simulated host."""

    model_config = ConfigDict(frozen=True)
    hostname: str = Field(min_length=1, description="Node hostname")
    gpus: tuple[GpuGroup, ...] = Field(min_length=1, description="GPU groups in index order")
    labels: dict[str, str] = Field(default_factory=dict, description="zone, region, pool, edge")


class FleetSpec(BaseModel):
    """A whole simulated fleet; the same seed gives the same fleet and the same readings."""

    model_config = ConfigDict(frozen=True)
    nodes: tuple[NodeSpec, ...] = Field(min_length=1, description="Hosts")
    seed: int = Field(default=0, description="Seed for UUIDs, noise and random faults")
    fault_rate_per_gpu_hour: float = Field(default=0.0, ge=0, description="Random faults per GPU-hour")

    @classmethod
    def uniform(
        cls, *, nodes: int, model: str, gpus_per_node: int = 8, seed: int = 0, prefix: str = "sim-node"
    ) -> FleetSpec:
        """A fleet of identical nodes, e.g. for benchmarks."""
        group = GpuGroup(model=model, count=gpus_per_node)
        return cls(
            nodes=tuple(NodeSpec(hostname=f"{prefix}-{i:04d}", gpus=(group,)) for i in range(nodes)),
            seed=seed,
        )
