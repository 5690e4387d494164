"""Preemption through the real broker, Postgres and Redis: grace, requeue, never non-preemptible work."""

from __future__ import annotations

from typing import Any

from libs.common.events import Envelope, Event
from libs.common.events.scheduler import (
    WorkloadEndedV1,
    WorkloadPlacedV1,
    WorkloadPreemptionScheduledV1,
    WorkloadQueuedV1,
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

GRACE_S = 2.0


def _first(events: list[tuple[Envelope, Event]], workload_id: str, kind: type[Any]) -> tuple[Envelope, Any]:
    return next((env, p) for env, p in events if isinstance(p, kind) and p.workload_id == workload_id)


async def _placed_and_running(
    client: Any, reader: Any, iso: Isolation, headers: dict[str, str], body: dict[str, Any]
) -> WorkloadPlacedV1:
    response = await client.post("/v1/workloads", json=body, headers=headers)
    assert response.status_code == 201, response.text
    wid = response.json()["workload_id"]
    events = await reader.wait_for(
        lambda evs: any(isinstance(p, WorkloadPlacedV1) for p in of_workload(evs, wid)), what=f"{wid} placed"
    )
    placed: WorkloadPlacedV1
    _, placed = _first(events, wid, WorkloadPlacedV1)
    await agent_reports(iso, placed, outcome=None)
    return placed


async def test_urgent_work_preempts_only_spot_work_after_its_grace_and_the_victim_is_requeued(
    isolation: Isolation,
) -> None:
    app = create_app(settings(isolation, preemption_grace_s=GRACE_S))
    async with running(app) as client, scheduler_reader(isolation) as reader:
        lab, prod = await create_tenant(client, "lab"), await create_tenant(client, "prod")
        await register_gpus(isolation, count=2)
        await capacity_known(client, lab, 2)
        # Both GPUs busy with low-priority work (urgency 0 → priority 0.4): one on-demand, one spot.
        steady = await _placed_and_running(client, reader, isolation, lab, spec(urgency=0.0))
        spot = spec(urgency=0.0, preemptible=True)
        victim = await _placed_and_running(client, reader, isolation, lab, spot)

        urgent = await client.post("/v1/workloads", json=spec(urgency=1.0), headers=prod)
        assert urgent.status_code == 201, urgent.text
        urgent_id = urgent.json()["workload_id"]

        events = await reader.wait_for(
            lambda evs: (
                any(isinstance(p, WorkloadPlacedV1) for p in of_workload(evs, urgent_id))
                and any(isinstance(p, WorkloadQueuedV1) for p in of_workload(evs, victim.workload_id)[1:])
            ),
            timeout=30,
            what="the urgent workload placed and the spot workload requeued",
        )
        _, scheduled = _first(events, victim.workload_id, WorkloadPreemptionScheduledV1)
        assert scheduled.placement_id == victim.placement_id
        assert scheduled.preempted_for == urgent_id

        ended_env, ended = _first(events, victim.workload_id, WorkloadEndedV1)
        assert ended.outcome == "preempted"
        assert ended.requeued
        assert ended.placement_id == victim.placement_id
        # The grace period is honoured: the victim is stopped at its deadline, not before, and only then
        # is the urgent workload given its GPU.
        assert ended_env.time >= scheduled.deadline
        placed_env, placed = _first(events, urgent_id, WorkloadPlacedV1)
        assert placed_env.time >= scheduled.deadline
        assert {a.gpu_uuid for a in placed.allocations} == {a.gpu_uuid for a in victim.allocations}

        # The on-demand workload was never asked to leave, whatever its priority.
        steady_events = [type(p) for p in of_workload(events, steady.workload_id)]
        assert WorkloadPreemptionScheduledV1 not in steady_events
        assert WorkloadEndedV1 not in steady_events

        async def victim_waits() -> bool:
            body = (await client.get(f"/v1/workloads/{victim.workload_id}", headers=lab)).json()
            return bool(body["state"] == "queued")

        await eventually(victim_waits, what="the preempted workload back in the queue")
        steady_now = (await client.get(f"/v1/workloads/{steady.workload_id}", headers=lab)).json()
        assert steady_now["state"] in ("placed", "running")
