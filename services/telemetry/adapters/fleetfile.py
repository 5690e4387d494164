"""Fleet files: the YAML inventory reads, turned into the simulated fleet the agent plays.

    nodes:
      - hostname: gpu-a-01
        labels: {zone: eu-west-1a, region: eu-west-1, pool: training, edge: false}
        gpus:
          - {model: A100-80GB, count: 8, mig: [3g.40gb, "3g.40gb@4"]}

Same shape as inventory's fleet files, and GPU uuids come from sim.ids.gpu_uuid(hostname, index), the
same function inventory uses, so samples and inventory records name the same GPUs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from services.telemetry.adapters.sim.spec import FleetSpec, GpuGroup, NodeSpec
from services.telemetry.domain.gpu_models import GPU_MODELS, model_for_name

__all__ = ["FleetFileError", "default_fleet", "load_fleet_file", "parse_fleet"]


class FleetFileError(ValueError):
    """The fleet file cannot be used; the message names the node or field."""


class _Group(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")
    model: str
    count: int = Field(default=1, ge=1, le=64)
    mig: tuple[str, ...] = ()


class _Node(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")
    hostname: str = Field(min_length=1)
    labels: dict[str, Any] = Field(default_factory=dict)
    gpus: tuple[_Group, ...] = Field(min_length=1)


class _File(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")
    nodes: tuple[_Node, ...] = Field(min_length=1)
    seed: int = 0
    fault_rate_per_gpu_hour: float = Field(default=0.0, ge=0)


def parse_fleet(text: str) -> FleetSpec:
    """Parse fleet-file YAML; catalog model names map to the simulator's model table."""
    try:
        raw = _File.model_validate(yaml.safe_load(text))
    except (yaml.YAMLError, ValidationError) as error:
        raise FleetFileError(f"invalid fleet file: {error}") from error
    nodes = tuple(_node(n) for n in raw.nodes)
    if len({n.hostname for n in nodes}) != len(nodes):
        raise FleetFileError("invalid fleet file: a hostname is listed twice")
    return FleetSpec(nodes=nodes, seed=raw.seed, fault_rate_per_gpu_hour=raw.fault_rate_per_gpu_hour)


def load_fleet_file(path: Path) -> FleetSpec:
    """Read and parse a fleet file."""
    return parse_fleet(path.read_text())


def default_fleet() -> FleetSpec:
    """The fleet an agent simulates when no file is given: two 8-GPU H100-80GB nodes.

    Discovery names them by their catalog model, so inventory registers them like any fleet-file GPU.
    """
    group = GpuGroup(model="H100", count=8, catalog_model="H100-80GB")
    return FleetSpec(nodes=tuple(NodeSpec(hostname=f"sim-node-{i:04d}", gpus=(group,)) for i in range(2)))


def _node(node: _Node) -> NodeSpec:
    labels = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in node.labels.items()}
    return NodeSpec(hostname=node.hostname, labels=labels, gpus=tuple(_group(node, g) for g in node.gpus))


def _group(node: _Node, group: _Group) -> GpuGroup:
    spec = model_for_name(group.model)
    if spec is None:
        raise FleetFileError(
            f"invalid fleet file: node {node.hostname}: no simulator model for {group.model!r}; "
            f"known: {', '.join(GPU_MODELS)}"
        )
    return GpuGroup(model=spec.name, count=group.count, catalog_model=group.model, mig=group.mig)
