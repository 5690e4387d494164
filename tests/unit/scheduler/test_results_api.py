"""Logs, outputs and tasks through the scheduler's API, on a memory object store."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime

import httpx
import pytest

from libs.common.objectstore import ObjectInfo, ObjectStore, ObjectStoreError, open_store
from services.scheduler.api import tasks as tasks_api
from services.scheduler.domain.stored import StoredWorkload
from services.scheduler.service.results import LogEvent, follow_log, log_index, read_log
from services.scheduler.service.tasks import EndWatch
from tests.unit.scheduler.results_harness import (
    ADMIN,
    T0_MS,
    FakeWorkloads,
    put_chunk,
    put_end,
    put_outputs,
    results_app,
    workload,
)

ACME = {"X-API-Key": "acme"}
GLOBEX = {"X-API-Key": "globex"}


@pytest.fixture
def store() -> ObjectStore:
    return open_store("memory://")


@pytest.fixture
def rows() -> FakeWorkloads:
    fake = FakeWorkloads()
    fake.add(workload("wl-1"))
    return fake


@pytest.fixture
async def client(store: ObjectStore, rows: FakeWorkloads) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=results_app(store, rows))
    async with httpx.AsyncClient(transport=transport, base_url="http://scheduler") as c:
        yield c


async def _two_placements(store: ObjectStore) -> None:
    # pl-b's first chunk is older than pl-a's, so pl-b's log comes first whatever the ids say.
    await put_chunk(store, "wl-1", "pl-a", 0, "a0\n", at_ms=T0_MS + 5000)
    await put_chunk(store, "wl-1", "pl-a", 1, "a1\n", at_ms=T0_MS + 6000)
    await put_chunk(store, "wl-1", "pl-b", 1, "b1\nb2\n", at_ms=T0_MS + 2000)
    await put_chunk(store, "wl-1", "pl-b", 0, "b0\n", at_ms=T0_MS + 1000)


async def test_the_log_is_its_placements_chunks_in_the_order_of_their_first_chunk(
    store: ObjectStore, client: httpx.AsyncClient
) -> None:
    await _two_placements(store)
    whole = await client.get("/v1/workloads/wl-1/logs", headers=ACME)
    assert whole.status_code == 200, whole.text
    assert whole.headers["content-type"].startswith("text/plain")
    assert whole.text == "b0\nb1\nb2\na0\na1\n"
    assert "x-log-truncated" not in whole.headers
    one = await client.get("/v1/workloads/wl-1/logs", params={"placement": "pl-a"}, headers=ACME)
    assert one.text == "a0\na1\n"
    admin = await client.get("/v1/workloads/wl-1/logs", params={"tail": 1}, headers={"X-API-Key": ADMIN})
    assert admin.text == "a1\n"


async def test_tail_keeps_the_last_lines_and_since_keeps_the_chunks_read_at_or_after_it(
    store: ObjectStore, client: httpx.AsyncClient
) -> None:
    await _two_placements(store)
    tail = await client.get("/v1/workloads/wl-1/logs", params={"tail": 3}, headers=ACME)
    assert tail.text == "b2\na0\na1\n"
    at = datetime.fromtimestamp((T0_MS + 2000) / 1000, tz=UTC).isoformat().replace("+00:00", "Z")
    since = await client.get("/v1/workloads/wl-1/logs", params={"since": at}, headers=ACME)
    assert since.text == "b1\nb2\na0\na1\n"
    both = await client.get("/v1/workloads/wl-1/logs", params={"since": at, "tail": 4}, headers=ACME)
    assert both.text == "b1\nb2\na0\na1\n"
    recent = await client.get("/v1/workloads/wl-1/logs", params={"since": "5m"}, headers=ACME)
    assert recent.text == "", "every chunk is from 2025, long before five minutes ago"
    await put_chunk(store, "wl-1", "pl-a", 2, "now\n", at_ms=int(datetime.now(UTC).timestamp() * 1000))
    recent = await client.get("/v1/workloads/wl-1/logs", params={"since": "5m"}, headers=ACME)
    assert recent.text == "now\n"


async def test_a_log_over_the_cap_keeps_its_end_in_whole_lines_and_says_it_was_cut(
    store: ObjectStore, client: httpx.AsyncClient
) -> None:
    for seq in range(10):  # 10 chunks of 1 MiB, each of 1024 lines of 1 KiB: past the 8 MiB cap
        await put_chunk(store, "wl-1", "pl-a", seq, (f"{seq}" + "x" * 1022 + "\n") * 1024, at_ms=T0_MS + seq)
    cut = await client.get("/v1/workloads/wl-1/logs", headers=ACME)
    assert cut.headers["x-log-truncated"] == "true"
    assert len(cut.content) <= 8 * 1024 * 1024
    assert cut.text.endswith("9" + "x" * 1022 + "\n")
    assert len(cut.content) % 1024 == 0, "it starts at a whole line"
    assert cut.text[0].isdigit()
    assert int(cut.headers["x-log-omitted-bytes"]) + len(cut.content) == 10 * 1024 * 1024
    line = "9" + "x" * 1022 + "\n"
    index = await log_index(store, "wl-1")
    small = await read_log(store, index.chunks, tail=2, max_bytes=1500)
    assert small.data == line.encode()
    assert small.omitted_bytes == 1024


async def _next(events: AsyncIterator[LogEvent]) -> LogEvent:
    return await asyncio.wait_for(anext(events), timeout=5)


async def test_follow_sends_the_log_then_each_new_chunk_and_ends_once_every_placement_completed(
    store: ObjectStore, rows: FakeWorkloads
) -> None:
    await put_chunk(store, "wl-1", "pl-a", 0, "first\n", at_ms=T0_MS)
    events = follow_log(store, rows, workload_id="wl-1", tenant="acme", poll_s=0.01)
    assert await _next(events) == LogEvent("log", "first\n", "pl-a/0")
    await put_chunk(store, "wl-1", "pl-a", 1, "second\n", at_ms=T0_MS + 1)
    assert await _next(events) == LogEvent("log", "second\n", "pl-a/1")
    await put_end(store, "wl-1", "pl-a")
    await put_chunk(store, "wl-1", "pl-b", 0, "moved\n", at_ms=T0_MS + 2)
    assert await _next(events) == LogEvent("log", "moved\n", "pl-b/0")
    rows.end("wl-1")
    ending = asyncio.ensure_future(_next(events))
    await asyncio.sleep(0.05)
    assert not ending.done(), "ended, but pl-b's log is not complete yet: the follower waits for it"
    await put_end(store, "wl-1", "pl-b")
    assert await ending == LogEvent("end", '{"complete": true}')
    with pytest.raises(StopAsyncIteration):
        await _next(events)


async def test_a_follower_of_an_ended_workload_whose_log_never_completes_ends_after_the_grace(
    store: ObjectStore, rows: FakeWorkloads
) -> None:
    await put_chunk(store, "wl-1", "pl-a", 0, "only\n", at_ms=T0_MS)
    rows.end("wl-1", state="cancelled")
    now = [0.0]
    events = follow_log(
        store, rows, workload_id="wl-1", tenant="acme", poll_s=0, end_grace_s=30, clock=lambda: now[0]
    )
    assert (await _next(events)).data == "only\n"
    waiting = asyncio.ensure_future(_next(events))
    await asyncio.sleep(0.01)
    assert not waiting.done(), "within the grace it keeps waiting for end.json"
    now[0] = 31.0
    assert await waiting == LogEvent("end", '{"complete": false}')


async def test_follow_over_http_is_server_sent_events_ending_with_end(
    store: ObjectStore, rows: FakeWorkloads, client: httpx.AsyncClient
) -> None:
    await put_chunk(store, "wl-1", "pl-a", 0, "one\ntwo\n", at_ms=T0_MS)
    await put_end(store, "wl-1", "pl-a")
    rows.end("wl-1")
    followed = await client.get("/v1/workloads/wl-1/logs", params={"follow": "true"}, headers=ACME)
    assert followed.status_code == 200
    assert followed.headers["content-type"].startswith("text/event-stream")
    body = followed.text.replace("\r\n", "\n")
    assert "id: pl-a/0\nevent: log\ndata: one\ndata: two\ndata: \n\n" in body, body
    assert "event: end" in body
    assert body.index("event: end") > body.index("data: two")


async def test_outputs_are_the_last_manifested_placements_and_each_listed_file_downloads(
    store: ObjectStore, client: httpx.AsyncClient
) -> None:
    none = await client.get("/v1/workloads/wl-1/outputs", headers=ACME)
    assert none.status_code == 404
    assert none.json()["error"]["code"] == "not_found"
    await put_outputs(store, "wl-1", "pl-a", {"old.txt": b"old"})
    manifest = await put_outputs(store, "wl-1", "pl-b", {"model/weights.json": b'{"w": 1}', "log.txt": b"hi"})
    await put_chunk(store, "wl-1", "pl-c", 0, "no outputs here\n", at_ms=T0_MS)
    listed = await client.get("/v1/workloads/wl-1/outputs", headers=ACME)
    assert listed.status_code == 200
    assert listed.json() == manifest
    got = await client.get("/v1/workloads/wl-1/outputs/model/weights.json", headers=ACME)
    assert (got.status_code, got.content) == (200, b'{"w": 1}')
    assert got.headers["content-type"] == "application/json"
    assert got.headers["content-disposition"].startswith("attachment")
    old = await client.get("/v1/workloads/wl-1/outputs/old.txt", headers=ACME)
    assert old.status_code == 404, "only the last placement's outputs are the workload's"
    assert old.json()["error"]["field"] == "path"
    escape = await client.get(
        "/v1/workloads/wl-1/outputs/model/%2e%2e/%2e%2e/pl-a/files/old.txt", headers=ACME
    )
    assert escape.status_code == 422
    assert escape.json()["error"]["field"] == "path"


def _not_found(workload_id: str) -> dict[str, object]:
    message = f"no workload {workload_id!r}"
    error = {"status": 404, "code": "not_found", "message": message, "field": "workload_id", "details": None}
    return {"error": error}


async def test_another_tenants_key_gets_the_same_404_on_logs_outputs_and_tasks(
    store: ObjectStore, client: httpx.AsyncClient
) -> None:
    await put_chunk(store, "wl-1", "pl-a", 0, "secret\n", at_ms=T0_MS)
    await put_outputs(store, "wl-1", "pl-a", {"secret.txt": b"s"})
    for path in (
        "/v1/workloads/wl-1/logs",
        "/v1/workloads/wl-1/logs?follow=true",
        "/v1/workloads/wl-1/outputs",
        "/v1/workloads/wl-1/outputs/secret.txt",
        "/v1/tasks/wl-1",
    ):
        mine = await client.get(path.replace("?follow=true", ""), headers=ACME)
        assert mine.status_code in (200, 202), (path, mine.text)
        theirs = await client.get(path, headers=GLOBEX)
        unknown = await client.get(path.replace("wl-1", "wl-none"), headers=ACME)
        assert theirs.status_code == unknown.status_code == 404, (path, theirs.text)
        assert theirs.json() == _not_found("wl-1"), "the body of GET /v1/workloads/{id}'s 404"
        assert unknown.json() == _not_found("wl-none")


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/v1/workloads/wl-1/logs?tail=-1", "tail"),
        ("/v1/workloads/wl-1/logs?since=yesterday", "since"),
        ("/v1/workloads/wl-1/logs?since=2026-12-02T10:00:00", "since"),
        ("/v1/workloads/wl-1/logs?since=999999999d", "since"),
        ("/v1/workloads/wl-1/logs?placement=../x", "placement"),
        ("/v1/workloads/wl-1/logs?follow=maybe", "follow"),
        ("/v1/tasks/wl-1?wait_s=301", "wait_s"),
    ],
)
async def test_a_bad_parameter_is_a_422_naming_it(client: httpx.AsyncClient, path: str, field: str) -> None:
    refused = await client.get(path, headers=ACME)
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["field"] == field


JOB = {
    "kind": "job",
    "image": {"name": "pytorch", "version": "2.3"},
    "resources": {"kind": "gpu", "model": "A100-80GB", "count": 1},
    "network": {"vpc_id": "vpc-main1", "subnet_id": "subnet-a001", "security_group_id": "sg-default"},
    "command": ["python", "-c", "print(1)"],
}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"wait_s": 301}, "wait_s"),
        ({"wait_s": "soon"}, "wait_s"),
        ({"kind": "instance"}, "kind"),
        ({"command": []}, "command"),
        ({"command": ["x"], "urgency": 2}, "urgency"),
    ],
)
async def test_a_bad_task_is_a_422_naming_the_field_before_anything_is_submitted(
    client: httpx.AsyncClient, change: dict[str, object], field: str
) -> None:
    refused = await client.post("/v1/tasks", json=JOB | change, headers=ACME)
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["field"] == field


async def test_a_task_answers_202_with_a_location_while_it_runs_and_200_with_its_result_once_ended(
    store: ObjectStore, rows: FakeWorkloads, client: httpx.AsyncClient
) -> None:
    running = await client.get("/v1/tasks/wl-1", headers=ACME)
    assert running.status_code == 202
    assert running.headers["location"] == "/v1/tasks/wl-1"
    body = running.json()
    assert (body["state"], body["exit_code"], body["log_tail"], body["outputs"]) == (
        "running",
        None,
        None,
        None,
    )
    assert body["links"] == {
        "workload": "/v1/workloads/wl-1",
        "logs": "/v1/workloads/wl-1/logs",
        "outputs": "/v1/workloads/wl-1/outputs",
    }
    await put_chunk(store, "wl-1", "pl-a", 0, "".join(f"line {i}\n" for i in range(150)), at_ms=T0_MS)
    await put_end(store, "wl-1", "pl-a")
    await put_outputs(store, "wl-1", "pl-a", {"result.txt": b"42"})
    waited = asyncio.ensure_future(client.get("/v1/tasks/wl-1", params={"wait_s": 5}, headers=ACME))
    await asyncio.sleep(0.05)
    assert not waited.done(), "it waits for the end"
    rows.end("wl-1", state="failed", exit_reason="failed", exit_code=3, reason="exit code 3")
    ended = await asyncio.wait_for(waited, timeout=5)
    assert ended.status_code == 200, ended.text
    result = ended.json()
    assert (result["state"], result["exit_reason"], result["exit_code"], result["signal"]) == (
        "failed",
        "failed",
        3,
        None,
    )
    assert result["reason"] == "exit code 3"
    assert result["log_tail"] == "".join(f"line {i}\n" for i in range(50, 150))
    assert result["outputs"] == [{"path": "result.txt", "size": 2}]


async def test_the_end_watch_wakes_each_waiter_when_its_workload_ends_and_times_out_the_rest() -> None:
    ended: set[str] = set()
    asked: list[list[str]] = []

    async def which(ids: Sequence[str]) -> set[str]:
        asked.append(sorted(ids))
        return ended & set(ids)

    watch = EndWatch(ended=which, poll_s=10)
    first = asyncio.ensure_future(watch.wait("wl-a", timeout_s=5))
    second = asyncio.ensure_future(watch.wait("wl-b", timeout_s=0.05))
    await asyncio.sleep(0)
    assert watch.waiting == 2
    assert await second is False
    ended.add("wl-a")
    watch.poke()
    assert await asyncio.wait_for(first, timeout=5) is True
    assert watch.waiting == 0
    assert ["wl-a", "wl-b"] in asked, "one question for every waiter"


class _DownStore(ObjectStore):
    """A store whose every listing fails, as an unreachable bucket does."""

    async def list(self, prefix: str) -> list[ObjectInfo]:
        raise ObjectStoreError(f"list {prefix!r} on s3://secret-bucket: connection refused")


async def test_an_unreachable_object_store_is_a_503_to_retry_that_names_no_bucket(
    rows: FakeWorkloads,
) -> None:
    down = _DownStore(None, url="s3://secret-bucket")
    transport = httpx.ASGITransport(app=results_app(down, rows))
    async with httpx.AsyncClient(transport=transport, base_url="http://scheduler") as c:
        answer = await c.get("/v1/workloads/wl-1/logs", headers=ACME)
    assert answer.status_code == 503
    assert answer.headers["retry-after"]
    assert answer.json()["error"]["code"] == "service_unavailable"
    assert "secret-bucket" not in answer.text


async def test_a_submitted_task_whose_result_cannot_be_read_is_a_202_with_its_location_never_a_5xx(
    rows: FakeWorkloads, monkeypatch: pytest.MonkeyPatch
) -> None:
    submitted = workload("wl-9", state="queued")

    async def fake_submit(*_: object, **__: object) -> StoredWorkload:
        return submitted

    monkeypatch.setattr(tasks_api, "submit", fake_submit)
    rows.add(workload("wl-9", state="completed"))
    transport = httpx.ASGITransport(app=results_app(_DownStore(None, url="s3://b"), rows))
    async with httpx.AsyncClient(transport=transport, base_url="http://scheduler") as c:
        answer = await c.post("/v1/tasks", json=JOB | {"wait_s": 0}, headers=ACME)
    assert answer.status_code == 202, "a 5xx would make the client retry and submit the job twice"
    assert answer.headers["location"] == "/v1/tasks/wl-9"
    assert (answer.json()["state"], answer.json()["exit_code"]) == ("queued", None)


class _FlakyGets(ObjectStore):
    """A memory store whose reads fail while ``failing`` is set, as a store briefly unreachable does."""

    failing = False

    async def get(self, key: str) -> bytes:
        if self.failing:
            self.failing = False
            raise ObjectStoreError(f"get {key!r}: connection reset")
        return await super().get(key)


async def test_a_follower_outlives_a_failed_read_and_sends_the_chunk_at_the_next_poll(
    rows: FakeWorkloads,
) -> None:
    memory = open_store("memory://")
    store = _FlakyGets(memory._store, url=memory.url)
    await put_chunk(store, "wl-1", "pl-a", 0, "first\n", at_ms=T0_MS)
    events = follow_log(store, rows, workload_id="wl-1", tenant="acme", poll_s=0.01)
    assert await _next(events) == LogEvent("log", "first\n", "pl-a/0")
    store.failing = True
    await put_chunk(store, "wl-1", "pl-a", 1, "second\n", at_ms=T0_MS + 1)
    assert await _next(events) == LogEvent("log", "second\n", "pl-a/1")
    assert not store.failing, "the read did fail once"


async def test_a_reconnecting_follower_resumes_after_its_last_event_id(
    store: ObjectStore, rows: FakeWorkloads, client: httpx.AsyncClient
) -> None:
    await _two_placements(store)
    for pl in ("pl-a", "pl-b"):
        await put_end(store, "wl-1", pl)
    rows.end("wl-1")
    resumed = await client.get(
        "/v1/workloads/wl-1/logs",
        params={"follow": "true"},
        headers=ACME | {"Last-Event-ID": "pl-b/1"},
    )
    body = resumed.text.replace("\r\n", "\n")
    assert "data: b" not in body, body
    assert "id: pl-a/0\nevent: log\ndata: a0\n" in body, body
    assert body.index("data: a1") < body.index("event: end")
