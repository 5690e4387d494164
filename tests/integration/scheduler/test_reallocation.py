"""A start on other devices than placed moves the placement (real broker, Postgres and Redis)."""

from __future__ import annotations

from libs.common.events import topics
from libs.common.events.agent import WorkloadStartedV1
from libs.common.events.scheduler import WorkloadPlacedV1, WorkloadReallocatedV1
from services.scheduler.adapters.workload_store import WorkloadStore
from services.scheduler.app import create_app
from services.scheduler.service.context import SchedulerContext
from tests.integration.scheduler.helpers import (
    capacity_known,
    create_tenant,
    of_workload,
    publish_events,
    register_gpus,
    scheduler_reader,
    settings,
    spec,
)
from tests.integration.support import Isolation, running


async def test_a_start_on_another_gpu_reallocates_the_placement_and_frees_the_one_placed(
    isolation: Isolation,
) -> None:
    app = create_app(settings(isolation))
    async with running(app) as client, scheduler_reader(isolation) as reader:
        headers = await create_tenant(client, "acme")
        gpus = await register_gpus(isolation, count=2)
        await capacity_known(client, headers, 2)
        first = (await client.post("/v1/workloads", json=spec(count=1), headers=headers)).json()[
            "workload_id"
        ]
        events = await reader.wait_for(
            lambda evs: any(isinstance(p, WorkloadPlacedV1) for p in of_workload(evs, first)),
            what="placement",
        )
        placed = next(p for p in of_workload(events, first) if isinstance(p, WorkloadPlacedV1))
        (given,) = [g for g in gpus if g != placed.allocations[0].gpu_uuid]

        started = WorkloadStartedV1(
            workload_id=first,
            tenant_id="acme",
            placement_id=placed.placement_id,
            node=placed.node,
            gpu_uuids=[given],
        )
        await publish_events(isolation, [started], topic=topics.NODE_AGENT)
        events = await reader.wait_for(
            lambda evs: any(isinstance(p, WorkloadReallocatedV1) for p in of_workload(evs, first)),
            what="the reallocation",
        )

        moved = next(p for p in of_workload(events, first) if isinstance(p, WorkloadReallocatedV1))
        assert moved.placement_id == placed.placement_id
        assert [a.gpu_uuid for a in moved.allocations] == [given]
        assert moved.previous == placed.allocations
        body = (await client.get(f"/v1/workloads/{first}", headers=headers)).json()
        assert (body["state"], body["placement_id"]) == ("running", placed.placement_id)
        ctx: SchedulerContext = app.state.scheduler
        grants = await WorkloadStore(ctx.runtime.pool).placement_grants(placed.placement_id)
        assert [g["gpu"] for g in grants or []] == [given]

        # The GPU it gave up is free: the next workload is placed on it.
        second = (await client.post("/v1/workloads", json=spec(count=1), headers=headers)).json()[
            "workload_id"
        ]
        events = await reader.wait_for(
            lambda evs: any(isinstance(p, WorkloadPlacedV1) for p in of_workload(evs, second)),
            what="the second placement",
        )
        next_placed = next(p for p in of_workload(events, second) if isinstance(p, WorkloadPlacedV1))
        assert [a.gpu_uuid for a in next_placed.allocations] == [placed.allocations[0].gpu_uuid]
