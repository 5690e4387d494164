"""What the agent process needs of the outside world, as protocols that adapters and fakes fit."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from services.telemetry.domain.devices import DeviceResult, MigListing

__all__ = ["DeviceActions", "Publisher"]


class Publisher(Protocol):
    """The agent's producer (adapters/agent/publisher.py, or its fake): messages go out by topic and key,
    each key always to the same partition and in order, and a flush waits until all were acknowledged."""

    def open(self, *, bootstrap: str, client_id: str) -> None:
        """Create the producer (it connects on start)."""
        ...

    async def start(self) -> None:
        """Connect."""
        ...

    async def stop(self) -> None:
        """Close; flush first: what was queued since the last flush may be lost."""
        ...

    async def publish(self, topic: str, messages: list[tuple[bytes, bytes]]) -> None:
        """Queue (key, value) messages at once (a slice of node batches); flush waits for them."""
        ...

    def queue(self, topic: str, *, key: bytes, value: bytes) -> None:
        """Queue one message; flush waits for it."""
        ...

    async def flush(self) -> None:
        """Wait until every message queued since the last flush is acknowledged; raises when one failed."""
        ...

    async def create_topics(self, topics: Sequence[str], *, partitions: int) -> None:
        """Create those of ``topics`` that do not exist yet, each with ``partitions`` partitions."""
        ...


class DeviceActions(Protocol):
    """What acts on the host's devices (adapters/devices/: nvidia-smi, the simulated fleet, or the fake).
    Every action returns what it ran; one that would be wrong to run (an invalid layout, an action this
    host is not set up for) is refused without running anything."""

    async def mig_profiles(self, *, gpu_uuid: str) -> MigListing:
        """The GPU instance profiles the GPU offers (listing.profiles)."""
        ...

    async def mig_instances(self, *, gpu_uuid: str) -> MigListing:
        """The GPU instances the GPU has now (listing.instances)."""
        ...

    async def apply_mig(self, *, gpu_uuid: str, profiles: Sequence[str]) -> DeviceResult:
        """Replace the GPU's instances by one of each profile named (a name twice: two instances);
        refused when the GPU cannot hold the layout."""
        ...

    async def reset_gpu(self, *, gpu_uuid: str) -> DeviceResult:
        """Reset the GPU."""
        ...

    async def reboot_node(self, *, node: str) -> DeviceResult:
        """Reboot the node; refused where no way to do it is configured."""
        ...
