"""Submit a task, get the result: POST /v1/tasks on a real scheduler answers when the host reports the end.

The host is played by this test (the process runner's shipping is another part of the work): it writes the
placement's log and outputs into the object store as the agent does, then publishes the agent's start
and exit, in that order, as the agent does.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any, TypedDict

from libs.common.events import topics
from libs.common.events.agent import WorkloadExitedV1, WorkloadStartedV1
from libs.common.events.scheduler import WorkloadPlacedV1
from libs.common.objectstore import open_store
from libs.common.objectstore.keys import log_chunk, log_end, output_file, output_manifest
from services.scheduler.app import create_app
from tests.integration.scheduler.helpers import (
    capacity_known,
    create_tenant,
    publish_events,
    register_gpus,
    scheduler_reader,
    settings,
    spec,
)
from tests.integration.support import Isolation, TopicReader, running


async def _placed(reader: TopicReader) -> WorkloadPlacedV1:
    def found(events: list[Any]) -> WorkloadPlacedV1 | None:
        return next((p for _, p in events if isinstance(p, WorkloadPlacedV1)), None)

    placed = found(await reader.wait_for(lambda evs: found(evs) is not None, what="the task placed"))
    assert placed is not None
    return placed


class _Ids(TypedDict):
    workload_id: str
    tenant_id: str
    placement_id: str
    node: str


async def _play_the_host(iso: Isolation, url: str, placed: WorkloadPlacedV1) -> None:
    store = open_store(url)
    wl, pl = placed.workload_id, placed.placement_id
    ids = _Ids(workload_id=wl, tenant_id=placed.tenant_id, placement_id=pl, node=placed.node)
    await publish_events(iso, [WorkloadStartedV1(**ids, pid=4242, runner="process")], topic=topics.NODE_AGENT)
    now_ms = int(time.time() * 1000)
    await store.put(log_chunk(wl, pl, seq=0, unix_ms=now_ms), b"loading\n")
    await store.put(log_chunk(wl, pl, seq=1, unix_ms=now_ms + 1), b"42\n")
    await store.put(log_end(wl, pl), json.dumps({"at": "now", "bytes": 11, "dropped_bytes": 0}).encode())
    await store.put(output_file(wl, pl, "answer.txt"), b"42")
    manifest = {"workload_id": wl, "placement_id": pl, "files": [{"path": "answer.txt", "size": 2}]}
    await store.put(
        output_manifest(wl, pl), json.dumps(manifest | {"total_bytes": 2, "dropped": []}).encode()
    )
    exited = WorkloadExitedV1(**ids, outcome="completed", exit_reason="succeeded", exit_code=0)
    await publish_events(iso, [exited], topic=topics.NODE_AGENT)


async def test_a_task_answers_with_its_exit_log_tail_and_outputs_once_the_host_reports_its_end(
    isolation: Isolation, tmp_path: Path
) -> None:
    url = (tmp_path / "objects").as_uri()
    app = create_app(settings(isolation, object_store_url=url))
    async with running(app) as client, scheduler_reader(isolation) as reader:
        acme, globex = await create_tenant(client, "acme"), await create_tenant(client, "globex")
        await register_gpus(isolation, count=1)
        await capacity_known(client, acme, 1)
        body = spec(command=["python", "-c", "print(42)"]) | {"wait_s": 30}
        asked = asyncio.ensure_future(client.post("/v1/tasks", json=body, headers=acme))
        placed = await _placed(reader)
        assert not asked.done(), "the task waits for its end"
        await _play_the_host(isolation, url, placed)
        answered = await asyncio.wait_for(asked, timeout=30)
        assert answered.status_code == 200, answered.text
        result = answered.json()
        wl = placed.workload_id
        assert result["workload_id"] == wl
        assert (result["state"], result["exit_reason"], result["exit_code"], result["signal"]) == (
            "completed",
            "succeeded",
            0,
            None,
        )
        assert result["log_tail"] == "loading\n42\n"
        assert result["outputs"] == [{"path": "answer.txt", "size": 2}]
        assert result["links"]["logs"] == f"/v1/workloads/{wl}/logs"

        again = await client.get(f"/v1/tasks/{wl}", headers=acme)
        assert (again.status_code, again.json()["exit_code"]) == (200, 0)
        tail = await client.get(f"/v1/workloads/{wl}/logs", params={"tail": 1}, headers=acme)
        assert tail.text == "42\n"
        followed = await client.get(f"/v1/workloads/{wl}/logs", params={"follow": "true"}, headers=acme)
        assert "data: loading" in followed.text
        assert followed.text.rstrip().endswith('data: {"complete": true}'), followed.text
        got = await client.get(f"/v1/workloads/{wl}/outputs/answer.txt", headers=acme)
        assert (got.status_code, got.content) == (200, b"42")
        for path in (f"/v1/tasks/{wl}", f"/v1/workloads/{wl}/logs", f"/v1/workloads/{wl}/outputs"):
            hidden = await client.get(path, headers=globex)
            assert hidden.status_code == 404, (path, hidden.text)

        waiting = await client.post(
            "/v1/tasks", json=spec(command=["sleep", "600"]) | {"wait_s": 0}, headers=acme
        )
        assert waiting.status_code == 202, waiting.text
        assert waiting.headers["location"] == f"/v1/tasks/{waiting.json()['workload_id']}"
        assert waiting.json()["exit_code"] is None
