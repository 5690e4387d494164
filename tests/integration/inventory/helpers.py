"""Shared steps of the inventory integration tests."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx

from libs.common.events import Event, envelop
from libs.common.events.inventory import GpuRegisteredV1
from libs.common.events.scheduler import AllocationItem, WorkloadEndedV1, WorkloadPlacedV1
from tests.integration.support import ADMIN_HEADERS, TopicReader

DEMO_FLEET = (
    Path(__file__).resolve().parents[3] / "services" / "inventory" / "adapters" / "fleets" / "demo.yaml"
)


def placed(
    *, workload: str, placement: str, items: list[tuple[str, str | None, str]], tenant: str = "acme"
) -> WorkloadPlacedV1:
    return WorkloadPlacedV1(
        workload_id=workload,
        tenant_id=tenant,
        placement_id=placement,
        node="n",
        kind="job",
        allocations=[
            AllocationItem(gpu_uuid=g, partition_id=p, units=Decimal(u), model="A100-80GB")
            for g, p, u in items
        ],
    )


def ended(*, workload: str, placement: str, tenant: str = "acme") -> WorkloadEndedV1:
    return WorkloadEndedV1(
        workload_id=workload, tenant_id=tenant, placement_id=placement, outcome="completed"
    )


def env(payload: Event) -> Any:
    return envelop(payload, source="test")


async def capacity(client: httpx.AsyncClient, **params: str) -> dict[str, Any]:
    response = await client.get("/v1/capacity", params=params, headers=ADMIN_HEADERS)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def registered_gpus(reader: TopicReader, node: str) -> list[GpuRegisteredV1]:
    events = await reader.poll()
    return [p for _, p in events if isinstance(p, GpuRegisteredV1) and p.node == node]
