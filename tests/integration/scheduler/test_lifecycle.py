"""A workload's life through the real broker, Postgres and Redis, with a stand-in node agent."""

from __future__ import annotations

from libs.common.events.scheduler import (
    WorkloadEndedV1,
    WorkloadPlacedV1,
    WorkloadQueuedV1,
    WorkloadRunningV1,
    WorkloadSubmittedV1,
)
from services.scheduler.app import create_app
from tests.integration.scheduler.helpers import (
    agent_reports,
    capacity_known,
    create_tenant,
    of_workload,
    register_gpus,
    scheduler_reader,
    settings,
    spec,
)
from tests.integration.support import Isolation, eventually, running


async def test_submitted_job_is_placed_runs_and_completes_with_events_in_order(isolation: Isolation) -> None:
    app = create_app(settings(isolation))
    async with running(app) as client, scheduler_reader(isolation) as reader:
        headers = await create_tenant(client, "acme")
        await register_gpus(isolation, count=2)
        await capacity_known(client, headers, 2)
        response = await client.post("/v1/workloads", json=spec(count=2), headers=headers)
        assert response.status_code == 201, response.text
        wid = response.json()["workload_id"]
        events = await reader.wait_for(
            lambda evs: any(isinstance(p, WorkloadPlacedV1) for p in of_workload(evs, wid)), what="placement"
        )
        placed = next(p for p in of_workload(events, wid) if isinstance(p, WorkloadPlacedV1))
        assert len(placed.allocations) == 2
        assert placed.node == "node-1"
        assert (await client.get(f"/v1/workloads/{wid}", headers=headers)).json()["state"] == "placed"

        await agent_reports(isolation, placed, outcome="completed")
        events = await reader.wait_for(
            lambda evs: any(isinstance(p, WorkloadEndedV1) for p in of_workload(evs, wid)), what="the end"
        )
        kinds = [type(p) for p in of_workload(events, wid)]
        assert kinds == [
            WorkloadSubmittedV1,
            WorkloadQueuedV1,
            WorkloadPlacedV1,
            WorkloadRunningV1,
            WorkloadEndedV1,
        ]
        ended = of_workload(events, wid)[-1]
        assert isinstance(ended, WorkloadEndedV1)
        assert ended.outcome == "completed"
        assert ended.placement_id == placed.placement_id

        async def completed() -> bool:
            body = (await client.get(f"/v1/workloads/{wid}", headers=headers)).json()
            return bool(body["state"] == "completed")

        await eventually(completed, what="completed state")
        explained = (await client.get(f"/v1/workloads/{wid}/priority", headers=headers)).json()
        assert explained["decayed_usage_unit_hours"] > 0, "the run's unit-hours accrue to the tenant"

        again = await client.post("/v1/workloads", json=spec(count=2), headers=headers)
        second = again.json()["workload_id"]
        await reader.wait_for(
            lambda evs: any(isinstance(p, WorkloadPlacedV1) for p in of_workload(evs, second)),
            what="the freed GPUs placed again",
        )
