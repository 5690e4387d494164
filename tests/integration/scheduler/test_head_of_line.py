"""Head-of-line blocking across GPU models, through the running service: submit over HTTP, read the queue."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import httpx
import pytest

from libs.common.events import Event, topics
from libs.common.events.inventory import GpuRegisteredV1
from libs.common.events.scheduler import WorkloadPlacedV1
from services.scheduler.app import create_app
from tests.integration.scheduler.helpers import (
    GIB,
    capacity_known,
    create_tenant,
    of_workload,
    publish_events,
    scheduler_reader,
    settings,
    spec,
)
from tests.integration.support import Isolation, TopicReader, eventually, running

H100 = "H100-80GB-SXM"


async def _register_node(iso: Isolation, *, node: str, model: str, units: str) -> None:
    """Stand in for inventory: eight GPUs of one model on a node of the `training` pool."""
    events: list[Event] = [
        GpuRegisteredV1(
            gpu_uuid=f"GPU-{node}-{i}",
            node=node,
            index=i,
            model=model,
            memory_bytes=80 * GIB,
            units=Decimal(units),
            labels={"pool": "training"},
        )
        for i in range(8)
    ]
    await publish_events(iso, events, topic=topics.INVENTORY)


async def _submit(client: httpx.AsyncClient, headers: dict[str, str], body: dict[str, Any]) -> str:
    response = await client.post("/v1/workloads", json=body, headers=headers)
    assert response.status_code == 201, response.text
    return str(response.json()["workload_id"])


async def _placed(reader: TopicReader, wids: list[str]) -> list[WorkloadPlacedV1]:
    events = await reader.wait_for(
        lambda evs: all(any(isinstance(p, WorkloadPlacedV1) for p in of_workload(evs, w)) for w in wids),
        what=f"{wids} placed",
    )
    return [p for w in wids for p in of_workload(events, w) if isinstance(p, WorkloadPlacedV1)]


async def test_an_a100_job_is_placed_while_8xh100_jobs_wait_for_capacity_in_the_same_pool(
    isolation: Isolation,
) -> None:
    app = create_app(settings(isolation))
    async with running(app) as client, scheduler_reader(isolation) as reader:
        big, small = await create_tenant(client, "big"), await create_tenant(client, "small")
        await _register_node(isolation, node="a100-1", model="A100-80GB", units="8")
        for node in ("h100-1", "h100-2"):
            await _register_node(isolation, node=node, model=H100, units="18.26")
        await capacity_known(client, big, 24)
        # High-priority work fills every H100: 292 of the pool's 356 units, over the 80% cap.
        await _placed(
            reader, [await _submit(client, big, spec(model=H100, count=8, urgency=1.0)) for _ in "ab"]
        )
        blocked = [await _submit(client, big, spec(model=H100, count=8, urgency=u)) for u in (0.0, 1.0)]

        a100 = await _submit(client, small, spec(count=1, urgency=0.5))

        (placed,) = await _placed(reader, [a100])
        assert placed.priority == pytest.approx(0.7)
        assert {a.model for a in placed.allocations} == {"A100-80GB"}

        async def reasons() -> dict[str, str | None] | None:
            rows = (await client.get("/v1/queue", headers=big)).json()
            found = {row["workload_id"]: row["wait_reason"] for row in rows}
            return found if set(found) == set(blocked) and all(found.values()) else None

        assert await eventually(reasons, what="the blocked jobs' reasons") == dict.fromkeys(
            blocked, "capacity"
        )
