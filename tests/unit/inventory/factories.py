"""Small builders for inventory tests: a node aggregate from a fleet snippet, and allocations."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

from services.inventory.adapters.fleet_yaml import parse_fleet
from services.inventory.domain.catalog import Catalog
from services.inventory.domain.records import Allocation, NodeInventory
from services.inventory.domain.registry import apply_discovery

AT = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)


def node_yaml(*, hostname: str = "node-a", pool: str = "training", zone: str = "z1", gpus: str) -> str:
    return (
        f"  - hostname: {hostname}\n    labels: {{zone: {zone}, region: r1, pool: {pool}}}\n    gpus:\n{gpus}"
    )


def fleet_yaml(*nodes: str) -> str:
    return "nodes:\n" + "".join(nodes)


def inventories(*, catalog: Catalog, text: str) -> list[NodeInventory]:
    return [
        apply_discovery(current=None, discovery=d, catalog=catalog, at=AT).inventory
        for d in parse_fleet(text=text, catalog=catalog)
    ]


def one_node(*, catalog: Catalog, gpus: str = "      - {model: A100-80GB, count: 2}\n") -> NodeInventory:
    return inventories(catalog=catalog, text=fleet_yaml(node_yaml(gpus=gpus)))[0]


def allocation(*, id: str, gpu_uuid: str, units: Decimal, partition_id: str | None = None) -> Allocation:
    return Allocation(
        allocation_id=id, workload_id=f"wl-{id}", gpu_uuid=gpu_uuid, partition_id=partition_id, units=units
    )
