"""What a workload runs travels with every placement, and the host's facts about it reach the API."""

from __future__ import annotations

from typing import Any, TypedDict

import httpx

from libs.common.events import Event, envelop, topics
from libs.common.events.agent import WorkloadExitedV1, WorkloadStartedV1
from libs.common.events.recovery import MigrationRequestedV1
from libs.common.events.scheduler import RunCheckpoint, RunSpec, WorkloadPlacedV1
from services.scheduler.app import create_app
from tests.integration.bus_fixtures import publish
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
from tests.integration.support import Isolation, TopicReader, eventually, running

GIB = 1024**3
RUN: dict[str, Any] = {
    "command": ["python", "train.py"],
    "args": ["--epochs", "3"],
    "env": {"WANDB_MODE": "offline"},
    "working_dir": "/workspace",
    "cpu_millis": 4000,
    "memory_bytes": 16 * GIB,
    "grace_s": 20,
}
EXPECTED = RunSpec(
    image="docker.io/pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime",
    command=["python", "train.py"],
    args=["--epochs", "3"],
    env={"WANDB_MODE": "offline"},
    working_dir="/workspace",
    cpu_millis=4000,
    memory_bytes=16 * GIB,
    time_limit_s=3600,
    grace_s=20,
)


async def _placed(reader: TopicReader, wid: str, *, not_: str | None = None) -> WorkloadPlacedV1:
    def found(events: list[Any]) -> WorkloadPlacedV1 | None:
        placed = [p for p in of_workload(events, wid) if isinstance(p, WorkloadPlacedV1)]
        return next((p for p in placed if p.placement_id != not_), None)

    placed = found(await reader.wait_for(lambda evs: found(evs) is not None, what=f"{wid} placed"))
    assert placed is not None
    return placed


class _Ids(TypedDict):
    workload_id: str
    tenant_id: str
    placement_id: str
    node: str


def _ids(placed: WorkloadPlacedV1) -> _Ids:
    return {
        "workload_id": placed.workload_id,
        "tenant_id": placed.tenant_id,
        "placement_id": placed.placement_id,
        "node": placed.node,
    }


async def _agent(iso: Isolation, *events: Event) -> None:
    await publish_events(iso, list(events), topic=topics.NODE_AGENT)


async def _shown(client: httpx.AsyncClient, wid: str, headers: dict[str, str], *, state: str) -> Any:
    async def probe() -> Any:
        body = (await client.get(f"/v1/workloads/{wid}", headers=headers)).json()
        return body if body["state"] == state else None

    return await eventually(probe, what=f"{wid} {state}")


async def test_the_run_spec_rides_every_placement_and_the_hosts_start_and_exit_reach_the_api(
    isolation: Isolation,
) -> None:
    app = create_app(settings(isolation))
    async with running(app) as client, scheduler_reader(isolation) as reader:
        acme, globex = await create_tenant(client, "acme"), await create_tenant(client, "globex")
        await register_gpus(isolation, count=3)
        await capacity_known(client, acme, 3)
        body = spec(image={"name": "pytorch", "version": "2.4"}, **RUN)
        created = await client.post("/v1/workloads", json=body, headers=acme)
        assert created.status_code == 201, created.text
        wid = created.json()["workload_id"]
        assert created.json()["run"] == EXPECTED.model_dump(mode="json")

        first = await _placed(reader, wid)
        assert first.run == EXPECTED
        move = MigrationRequestedV1(
            incident_id="inc-1",
            workload_id=wid,
            tenant_id="acme",
            away_from_gpu=first.allocations[0].gpu_uuid,
        )
        await publish(isolation, [envelop(move, source="test")], topic=topics.RECOVERY)
        second = await _placed(reader, wid, not_=first.placement_id)
        assert second.run == EXPECTED, "a re-placement carries the same run"

        notes = ["restarted from the start", "memory not isolated"]
        await _agent(isolation, WorkloadStartedV1(**_ids(second), pid=4242, runner="process", notes=notes))
        shown = await _shown(client, wid, acme, state="running")
        assert shown["host"] == {"pid": 4242, "container_id": None, "runner": "process", "notes": notes}
        assert shown["exit"] is None
        exited = WorkloadExitedV1(**_ids(second), outcome="failed", exit_reason="failed", exit_code=3)
        await _agent(isolation, exited)
        shown = await _shown(client, wid, acme, state="failed")
        assert shown["exit"] == {"reason": "failed", "code": 3, "signal": None}
        assert shown["host"]["pid"] == 4242
        hidden = await client.get(f"/v1/workloads/{wid}", headers=globex)
        assert hidden.status_code == 404, hidden.text

        # A cancel ends the workload at once; the host's report of the process's end comes after.
        other = (await client.post("/v1/workloads", json=spec(command=["sleep", "600"]), headers=acme)).json()
        placed = await _placed(reader, other["workload_id"])
        assert placed.run is not None
        assert placed.run.command == ["sleep", "600"]
        await _agent(isolation, WorkloadStartedV1(**_ids(placed), pid=77, runner="process"))
        await _shown(client, placed.workload_id, acme, state="running")
        cancelled = await client.post(f"/v1/workloads/{placed.workload_id}/cancel", headers=acme)
        assert cancelled.json()["state"] == "cancelled", cancelled.text
        late = WorkloadExitedV1(**_ids(placed), outcome="failed", exit_reason="cancelled", signal=15)
        await _agent(isolation, late)

        async def exit_kept() -> Any:
            body = (await client.get(f"/v1/workloads/{placed.workload_id}", headers=acme)).json()
            return body if body["exit"] is not None else None

        kept = await eventually(exit_kept, what="the late exit's facts kept")
        assert (kept["state"], kept["outcome"]) == ("cancelled", "cancelled")
        assert kept["exit"] == {"reason": "cancelled", "code": None, "signal": 15}


async def test_a_bad_run_field_is_a_422_naming_it_and_a_draft_carries_its_run_to_the_placement(
    isolation: Isolation,
) -> None:
    app = create_app(settings(isolation))
    async with running(app) as client, scheduler_reader(isolation) as reader:
        acme = await create_tenant(client, "acme")
        await register_gpus(isolation, count=1)
        await capacity_known(client, acme, 1)
        images = {i["name"]: i for i in (await client.get("/v1/images", headers=acme)).json()}
        assert images["cuda-base"]["references"]["12.4"] == "docker.io/nvidia/cuda:12.4.1-base-ubuntu22.04"
        for bad, field in (
            ({"env": {"CUDA_VISIBLE_DEVICES": "0"}}, "env.CUDA_VISIBLE_DEVICES.[key]"),
            ({"working_dir": "relative"}, "working_dir"),
            ({"cpu_millis": 0}, "cpu_millis"),
            ({"checkpoint": {"signal": "SIGKILL"}}, "checkpoint.signal"),
            ({"checkpoint": {"command": []}}, "checkpoint.command"),
            ({"checkpoint": {"signal": "SIGUSR1", "timeout_s": 7200}}, "checkpoint.timeout_s"),
        ):
            refused = await client.post("/v1/workloads", json=spec(**bad), headers=acme)
            assert refused.status_code == 422, refused.text
            assert refused.json()["error"]["field"] == field
        bad_option = await client.post(
            "/v1/workloads/drafts", json={"options": {"env": {"GPUCLOUD_X": "1"}}}, headers=acme
        )
        assert bad_option.status_code == 422, bad_option.text
        assert bad_option.json()["error"]["field"].startswith("options.env.GPUCLOUD_X")

        options = {
            "kind": "job",
            "command": ["nvidia-smi"],
            "args": ["-L"],
            "memory_bytes": 1 * GIB,
            "checkpoint": {"signal": "SIGUSR1", "timeout_s": 30},
        }
        opened = await client.post("/v1/workloads/drafts", json={"options": options}, headers=acme)
        assert opened.status_code == 201, opened.text
        draft = opened.json()["draft_id"]
        steps = {
            "image": {"name": "cuda-base", "version": "12.4"},
            "resources": {"kind": "gpu", "model": "A100-80GB", "count": 1},
            "network": spec()["network"],
        }
        for step, body in steps.items():
            filled = await client.put(f"/v1/workloads/drafts/{draft}/{step}", json=body, headers=acme)
            assert filled.status_code == 200, filled.text
        submitted = await client.post(f"/v1/workloads/drafts/{draft}/submit", headers=acme)
        assert submitted.status_code == 201, submitted.text

        placed = await _placed(reader, submitted.json()["workload_id"])
        assert placed.run == RunSpec(
            image="docker.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
            command=["nvidia-smi"],
            args=["-L"],
            memory_bytes=GIB,
            checkpoint=RunCheckpoint(signal="SIGUSR1", timeout_s=30),
        )
