"""Shared steps of the scheduler's integration tests: GPUs from 'inventory', an agent stand-in, tenants."""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Literal, TypedDict

import httpx

from libs.common.events import Event, envelop, topics
from libs.common.events.agent import WorkloadExitedV1, WorkloadStartedV1
from libs.common.events.inventory import GpuRegisteredV1
from libs.common.events.scheduler import WorkloadPlacedV1
from services.scheduler.settings import SchedulerSettings
from tests.integration.bus_fixtures import publish
from tests.integration.support import ADMIN_HEADERS, Isolation, TopicReader, eventually

GIB = 1024**3


def settings(iso: Isolation, **overrides: Any) -> SchedulerSettings:
    """Scheduler settings on this test's slice, with quick passes."""
    values: dict[str, Any] = {"pass_interval_s": 0.2, "lock_retry_s": 0.5, **overrides}
    return iso.settings(SchedulerSettings, "scheduler", **values)


def spec(*, model: str = "A100-80GB", count: int = 1, **extra: Any) -> dict[str, Any]:
    """A valid one-shot creation request."""
    return {
        "kind": "job",
        "image": {"name": "pytorch", "version": "2.3"},
        "resources": {"kind": "gpu", "model": model, "count": count},
        "network": {"vpc_id": "vpc-main1", "subnet_id": "subnet-a001", "security_group_id": "sg-default"},
        "urgency": 0.5,
        "tags": {"project": "vision"},
        "time_limit_s": 3600,
        **extra,
    }


async def publish_events(iso: Isolation, payloads: list[Event], *, topic: str) -> None:
    """Publish payloads as another service would."""
    await publish(iso, [envelop(p, source="test") for p in payloads], topic=topic)


async def register_gpus(
    iso: Isolation, *, node: str = "node-1", count: int = 4, model: str = "A100-80GB"
) -> list[str]:
    """Stand in for inventory: announce ``count`` healthy whole GPUs on one node."""
    uuids = [f"GPU-{node}-{i}" for i in range(count)]
    events: list[Event] = [
        GpuRegisteredV1(gpu_uuid=u, node=node, index=i, model=model, memory_bytes=80 * GIB, units=Decimal(8))
        for i, u in enumerate(uuids)
    ]
    await publish_events(iso, events, topic=topics.INVENTORY)
    return uuids


class _PlacementIds(TypedDict):
    workload_id: str
    tenant_id: str
    placement_id: str
    node: str


async def agent_reports(
    iso: Isolation, placed: WorkloadPlacedV1, *, outcome: Literal["completed", "failed"] | None
) -> None:
    """Stand in for the node agent: start the placement, and end it when ``outcome`` is given."""
    ids: _PlacementIds = {
        "workload_id": placed.workload_id,
        "tenant_id": placed.tenant_id,
        "placement_id": placed.placement_id,
        "node": placed.node,
    }
    events: list[Event] = [WorkloadStartedV1(**ids)]
    if outcome is not None:
        events.append(WorkloadExitedV1(**ids, outcome=outcome))
    await publish_events(iso, events, topic=topics.NODE_AGENT)


async def create_tenant(client: httpx.AsyncClient, tenant: str) -> dict[str, str]:
    """Create a tenant through the admin API; returns headers carrying its key."""
    response = await client.post(
        "/v1/admin/tenants", json={"tenant_id": tenant, "name": tenant}, headers=ADMIN_HEADERS
    )
    assert response.status_code == 201, response.text
    return {"X-API-Key": response.json()["key"]["api_key"]}


async def capacity_known(client: httpx.AsyncClient, headers: dict[str, str], gpus: int) -> None:
    """Wait until the scheduler has learnt ``gpus`` GPUs from inventory events."""

    async def probe() -> bool:
        response = await client.get("/v1/recommendations/gpu?memory_gb=1", headers=headers)
        return response.status_code == 200 and response.json()["fleet_gpus"] >= gpus

    await eventually(probe, timeout=30, what=f"{gpus} GPUs known")


def scheduler_reader(iso: Isolation) -> TopicReader:
    """Reads the scheduler's topic from the beginning."""
    return TopicReader(bootstrap=iso.infra.kafka, topic=iso.topic_prefix + topics.SCHEDULER)


def of_workload(events: list[tuple[Any, Event]], workload_id: str) -> list[Event]:
    """Payloads about one workload, in topic order."""
    return [p for _, p in events if getattr(p, "workload_id", None) == workload_id]
