"""The GpuProbe port: how the node agent reads GPUs, whatever sits behind it (NVML, simulator, fake)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from services.telemetry.domain.metrics import GpuReading, XidEvent

__all__ = ["GpuInfo", "GpuProbe", "MigInstanceInfo", "NodeDiscovery", "ProbeError"]

_FROZEN = ConfigDict(frozen=True, extra="ignore")


class ProbeError(Exception):
    """A probe cannot work at all on this host (as opposed to one GPU failing)."""


class MigInstanceInfo(BaseModel):
    """One MIG instance carved out of a GPU."""

    model_config = _FROZEN
    mig_uuid: str = Field(description="MIG device UUID")
    gpu_instance_id: int = Field(description="GPU instance id")
    compute_instance_id: int | None = Field(default=None, description="Compute instance id")
    memory_bytes: int | None = Field(default=None, description="Memory of the instance, bytes")
    profile: str | None = Field(default=None, description="GPU instance profile, e.g. 1g.10gb; None: unknown")
    slot: int | None = Field(default=None, description="Placement start slot; None: unknown")


class GpuInfo(BaseModel):
    """What discovery tells inventory about one GPU."""

    model_config = _FROZEN
    uuid: str = Field(description="GPU UUID (GPU-...)")
    index: int = Field(ge=0, description="NVML index on the node")
    model_name: str = Field(description="Product name as the driver reports it")
    memory_bytes: int | None = Field(default=None, description="Framebuffer size, bytes")
    pci_bus_id: str | None = Field(default=None, description="PCIe bus id, e.g. 00000000:18:00.0")
    nvlink_peers: tuple[str, ...] = Field(default=(), description="PCIe bus ids at the far end of NVLinks")
    mig_enabled: bool | None = Field(default=None, description="MIG mode; None = not MIG-capable")
    mig_instances: tuple[MigInstanceInfo, ...] = Field(default=(), description="Current MIG instances")


class NodeDiscovery(BaseModel):
    """The GPUs of one node, as found at agent start."""

    model_config = _FROZEN
    hostname: str = Field(description="Node hostname")
    driver_version: str | None = Field(default=None, description="NVIDIA driver version")
    gpus: tuple[GpuInfo, ...] = Field(description="GPUs in index order")


@runtime_checkable
class GpuProbe(Protocol):
    """Reads one node's GPUs. A failing GPU is a GpuLost reading, never an exception."""

    async def discover(self) -> NodeDiscovery:
        """List the node's GPUs; raises a ProbeError subclass when the probe cannot work here."""
        ...

    async def sample(self) -> list[GpuReading]:
        """Read every discovered GPU once: one GpuSample or GpuLost per GPU, in index order."""
        ...

    async def poll_xids(self) -> list[XidEvent]:
        """Return XID events received since the previous call (waits at most a short timeout)."""
        ...

    async def close(self) -> None:
        """Release driver resources; safe to call twice."""
        ...
