"""Fleet files: a YAML description of a static or simulated pool, turned into discovery reports.

    nodes:
      - hostname: gpu-a-01
        labels: {zone: eu-west-1a, region: eu-west-1, pool: training, edge: false}
        gpus:
          - {model: A100-80GB, count: 8, mig: [3g.40gb, "3g.40gb@4"]}   # mig is optional

Generated facts are deterministic (uuid from hostname and index), so loading the same file
twice is a re-discovery of identical facts and changes nothing.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from libs.common.yaml_safe import MIB, YamlLimits, YamlRefused, load
from services.inventory.domain.catalog import Catalog
from services.inventory.domain.errors import FleetFileError, InventoryError
from services.inventory.domain.mig import MigRequest, place_layout
from services.inventory.domain.records import DiscoveredGpu, NodeDiscovery, NodeLabels

__all__ = ["FLEET_LIMITS", "gpu_uuid", "parse_fleet", "parse_fleet_async"]

_NAMESPACE = uuid.UUID("6f1c2a4e-0b7d-4c39-9a55-3f0e8f0c1d2b")
_STRICT = ConfigDict(frozen=True, extra="forbid")
# A 10,000-GPU fleet file is about 2 MiB; aliases may repeat a GPU group per node, never more.
FLEET_LIMITS = YamlLimits(max_bytes=16 * MIB)


class _GpuGroup(BaseModel):
    model_config = _STRICT

    model: str
    count: int = Field(default=1, ge=1, le=64)
    mig: tuple[str, ...] = ()


class _NodeSpec(BaseModel):
    model_config = _STRICT

    hostname: str = Field(min_length=1)
    labels: NodeLabels
    gpus: tuple[_GpuGroup, ...] = ()


class _FleetSpec(BaseModel):
    model_config = _STRICT

    nodes: tuple[_NodeSpec, ...] = Field(min_length=1)


def _mig_request(text: str) -> MigRequest:
    profile, _, start = text.partition("@")
    if start and not start.isdigit():
        raise FleetFileError(f"MIG entry {text!r}: the start slot after '@' must be a number")
    return MigRequest(profile=profile.strip(), start=int(start) if start else None)


def gpu_uuid(*, hostname: str, index: int) -> str:
    """The stable uuid a fleet-file GPU gets, shaped like NVML's."""
    return f"GPU-{uuid.uuid5(_NAMESPACE, f'{hostname}/{index}')}"


def _group_gpus(node: _NodeSpec, group: _GpuGroup, first: int, catalog: Catalog) -> list[DiscoveredGpu]:
    model = catalog.get(group.model)
    indexes = range(first, first + group.count)
    uuids = [gpu_uuid(hostname=node.hostname, index=i) for i in indexes]
    requests = tuple(_mig_request(text) for text in group.mig)
    if requests:
        place_layout(model=model, requests=requests)  # refuse an impossible layout here, naming the node
    return [
        DiscoveredGpu(
            uuid=uuids[n],
            index=i,
            model=model.name,
            pci_bus_id=f"00000000:{0x18 + i:02X}:00.0",
            # Same-model cards of an NVLink-capable group are modelled as one NVLink domain (HGX).
            nvlink_peers=tuple(u for u in uuids if u != uuids[n]) if model.nvlink else (),
            mig_enabled=bool(group.mig),
            mig_instances=requests,
        )
        for n, i in enumerate(indexes)
    ]


def _node_discovery(node: _NodeSpec, catalog: Catalog) -> NodeDiscovery:
    gpus: list[DiscoveredGpu] = []
    for group in node.gpus:
        gpus.extend(_group_gpus(node, group, len(gpus), catalog))
    return NodeDiscovery(hostname=node.hostname, labels=node.labels, gpus=tuple(gpus))


def parse_fleet(*, text: str, catalog: Catalog) -> tuple[NodeDiscovery, ...]:
    """Parse a fleet file into one discovery report per node, or raise FleetFileError naming the problem."""
    try:
        spec = _FleetSpec.model_validate(load(text, limits=FLEET_LIMITS))
    except (YamlRefused, ValidationError) as error:
        raise FleetFileError(f"invalid fleet file: {error}") from error
    counts = Counter(n.hostname for n in spec.nodes)
    if duplicates := sorted(h for h, count in counts.items() if count > 1):
        raise FleetFileError(f"invalid fleet file: hostname listed twice: {', '.join(duplicates)}")
    discoveries: list[NodeDiscovery] = []
    for node in spec.nodes:
        try:
            discoveries.append(_node_discovery(node, catalog))
        except InventoryError as error:
            raise FleetFileError(f"invalid fleet file: node {node.hostname}: {error}") from error
    return tuple(discoveries)


async def parse_fleet_async(*, text: str, catalog: Catalog) -> tuple[NodeDiscovery, ...]:
    """`parse_fleet` in a worker thread: a large fleet file never holds up the event loop."""
    return await asyncio.to_thread(parse_fleet, text=text, catalog=catalog)
