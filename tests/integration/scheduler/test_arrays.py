"""Job arrays through the running service: all or nothing, one statement, idempotent under a client key."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import httpx
from fastapi import FastAPI

from libs.common.events.scheduler import WorkloadPlacedV1
from services.scheduler.app import create_app
from tests.integration.scheduler.helpers import (
    capacity_known,
    create_tenant,
    of_workload,
    register_gpus,
    scheduler_reader,
    settings,
    spec,
)
from tests.integration.support import ADMIN_HEADERS, Isolation, eventually, running

ARRAYS = "/v1/workload-arrays"


def _app(isolation: Isolation, *, placer: bool = False) -> FastAPI:
    """The scheduler; without its placer unless asked, so thousands of queued workloads stay queued."""
    app = create_app(settings(isolation))
    if not placer:
        runtime = app.state.runtime
        runtime.background = [(name, task) for name, task in runtime.background if name != "placer"]
    return app


@asynccontextmanager
async def _schema(isolation: Isolation) -> AsyncIterator[asyncpg.Connection[Any]]:
    conn = await asyncpg.connect(
        isolation.infra.database_url, server_settings={"search_path": isolation.schema("scheduler")}
    )
    try:
        yield conn
    finally:
        await conn.close()


def _items(count: int, **extra: Any) -> list[dict[str, Any]]:
    """``count`` valid requests, each running its own shard (so no two items are the same)."""
    return [spec(args=["--shard", str(i)], **extra) for i in range(count)]


async def _stored(isolation: Isolation) -> tuple[int, int, int]:
    """How many workloads, workload outbox rows and arrays the scheduler's schema holds."""
    async with _schema(isolation) as conn:
        row = await conn.fetchrow(
            "SELECT (SELECT count(*) FROM workloads) AS w, "
            "(SELECT count(*) FROM outbox WHERE key LIKE 'wl-%') AS o, "
            "(SELECT count(*) FROM workload_arrays) AS a"
        )
    assert row is not None
    return int(row["w"]), int(row["o"]), int(row["a"])


async def test_an_array_of_ten_thousand_is_stored_once_each_with_its_two_events(isolation: Isolation) -> None:
    async with running(_app(isolation)) as client:
        headers = await create_tenant(client, "acme")
        created = await client.post(ARRAYS, json={"items": _items(10_000)}, headers=headers, timeout=60)
        assert created.status_code == 201, created.text[:500]
        body = created.json()
        ids = [item["workload_id"] for item in body["items"]]
        assert body["count"] == 10_000
        assert len(set(ids)) == 10_000
        assert [item["index"] for item in body["items"]] == list(range(10_000))
        assert [item["position"] for item in body["items"]] == list(range(1, 10_001))
        async with _schema(isolation) as conn:
            rows = await conn.fetch(
                "SELECT workload_id, array_id, array_index, state, tenant_id, run_spec->'args' AS args "
                "FROM workloads ORDER BY array_index"
            )
            events = await conn.fetch(
                "SELECT key, count(*) AS n FROM outbox WHERE key LIKE 'wl-%' GROUP BY key"
            )
        assert [r["workload_id"] for r in rows] == ids
        assert {(r["array_id"], r["state"], r["tenant_id"]) for r in rows} == {
            (body["array_id"], "queued", "acme")
        }
        assert json.loads(rows[9_999]["args"]) == ["--shard", "9999"]
        assert {r["key"]: r["n"] for r in events} == dict.fromkeys(ids, 2)

        listed = await client.get(
            "/v1/workloads", params={"array": body["array_id"], "limit": 3, "offset": 5}, headers=headers
        )
        assert [w["array_index"] for w in listed.json()] == [5, 6, 7]
        assert [w["workload_id"] for w in listed.json()] == ids[5:8]
        again = await client.get(f"{ARRAYS}/{body['array_id']}", headers=headers)
        assert again.status_code == 200
        assert again.json() == body


async def test_one_bad_item_among_many_refuses_the_array_listing_each_bad_item(isolation: Isolation) -> None:
    async with running(_app(isolation)) as client:
        headers = await create_tenant(client, "acme")
        items: list[Any] = _items(50)
        items[7]["resources"]["count"] = 0
        items[31] = {**items[31], "shoe_size": 44}
        items[40]["resources"]["model"] = "Z9000"
        items[44] = "not an object"
        refused = await client.post(ARRAYS, json={"items": items}, headers=headers)
        assert refused.status_code == 422, refused.text
        error = refused.json()["error"]
        assert [d["index"] for d in error["details"]] == [7, 31, 40, 44]
        assert error["field"] == "items.7.resources.count"
        assert [d["field"] for d in error["details"]] == [
            "items.7.resources.count",
            "items.31.shoe_size",
            "items.40.resources.model",
            "items.44",
        ]
        for index in (7, 31, 40):  # the message a single request with that body gets
            single = (await client.post("/v1/workloads", json=items[index], headers=headers)).json()["error"]
            detail = error["details"][[7, 31, 40].index(index)]
            assert f"items.{index}.{single['field']}" == detail["field"]
            assert single["message"] == f"{single['field']}: {detail['message']}"
        assert await _stored(isolation) == (0, 0, 0)


async def test_an_array_of_more_than_ten_thousand_is_refused_naming_the_limit(isolation: Isolation) -> None:
    async with running(_app(isolation)) as client:
        headers = await create_tenant(client, "acme")
        refused = await client.post(ARRAYS, json={"items": _items(10_001)}, headers=headers, timeout=60)
        assert refused.status_code == 422
        error = refused.json()["error"]
        assert error["field"] == "items"
        assert "1 to 10000 items, this one 10001" in error["message"]
        empty = await client.post(ARRAYS, json={"items": []}, headers=headers)
        assert empty.status_code == 422
        assert empty.json()["error"]["field"] == "items"
        assert await _stored(isolation) == (0, 0, 0)


async def test_an_array_over_the_quota_is_refused_whole_and_nothing_is_stored(isolation: Isolation) -> None:
    async with running(_app(isolation, placer=True)) as client, scheduler_reader(isolation) as reader:
        headers = await create_tenant(client, "acme")
        await register_gpus(isolation, count=4)
        await capacity_known(client, headers, 4)
        put = await client.put("/v1/admin/tenants/acme/quota", json={"gpus": 3}, headers=ADMIN_HEADERS)
        assert put.status_code == 200, put.text

        never = await client.post(ARRAYS, json={"items": [*_items(2), spec(count=4)]}, headers=headers)
        assert never.status_code == 409, never.text
        assert never.json()["error"]["field"] == "items.2"
        assert "GPUs: limit 3" in never.json()["error"]["message"]
        assert "asked 4" in never.json()["error"]["message"]
        # More work than the quota holds, item by item within it: queued, as the items sent one by one.
        queued = await client.post(ARRAYS, json={"items": _items(5)}, headers=headers)
        assert queued.status_code == 201, queued.text
        cancelled = [
            await client.post(f"/v1/workloads/{i['workload_id']}/cancel", headers=headers)
            for i in queued.json()["items"]
        ]
        assert {c.status_code for c in cancelled} == {200}
        await eventually(lambda: _gpus_used(client, 0), what="the cancelled array's quota given back")

        first = (await client.post("/v1/workloads", json=spec(count=2), headers=headers)).json()[
            "workload_id"
        ]
        await reader.wait_for(
            lambda evs: any(isinstance(p, WorkloadPlacedV1) for p in of_workload(evs, first))
        )
        await eventually(lambda: _gpus_used(client, 2), what="usage counted in Redis")
        now = await client.post(ARRAYS, json={"items": [*_items(1), spec(count=2)]}, headers=headers)
        assert now.status_code == 429, now.text
        assert now.json()["error"]["field"] == "quota.gpus"
        workloads, _, arrays = await _stored(isolation)
        assert (workloads, arrays) == (6, 1)  # the queued array's five and the single; no refused array


async def _gpus_used(client: httpx.AsyncClient, value: int) -> bool:
    quota = (await client.get("/v1/admin/tenants/acme/quota", headers=ADMIN_HEADERS)).json()
    return bool(quota["usage"]["gpus"] == value)


async def test_a_retry_under_the_same_key_answers_the_same_array_without_storing_again(
    isolation: Isolation,
) -> None:
    async with running(_app(isolation)) as client:
        headers = await create_tenant(client, "acme")
        keyed = {**headers, "Idempotency-Key": "sweep-2026-12-03"}
        body = {"items": _items(20)}
        first = await client.post(ARRAYS, json=body, headers=keyed)
        assert first.status_code == 201, first.text
        stored = await _stored(isolation)
        retry = await client.post(ARRAYS, json=body, headers=keyed)
        assert retry.status_code == 200, retry.text
        assert retry.json() == first.json()
        assert await _stored(isolation) == stored == (20, 40, 1)

        other = await client.post(ARRAYS, json={"items": _items(21)}, headers=keyed)
        assert other.status_code == 409, other.text
        error = other.json()["error"]
        assert error["code"] == "idempotency_key_reused"
        assert error["field"] == "Idempotency-Key"
        assert "another request body" in error["message"]
        invalid = await client.post(ARRAYS, json={"items": [{"kind": "nonsense"}]}, headers=keyed)
        assert (invalid.status_code, invalid.json()["error"]["code"]) == (409, "idempotency_key_reused")
        assert await _stored(isolation) == stored


async def test_the_same_key_from_another_tenant_is_another_array(isolation: Isolation) -> None:
    async with running(_app(isolation)) as client:
        acme = {**await create_tenant(client, "acme"), "Idempotency-Key": "k1"}
        umbrella = {**await create_tenant(client, "umbrella"), "Idempotency-Key": "k1"}
        body = {"items": _items(3)}
        one = await client.post(ARRAYS, json=body, headers=acme)
        two = await client.post(ARRAYS, json=body, headers=umbrella)
        assert (one.status_code, two.status_code) == (201, 201)
        assert one.json()["array_id"] != two.json()["array_id"]
        hidden = await client.get(f"{ARRAYS}/{one.json()['array_id']}", headers=umbrella)
        assert hidden.status_code == 404


async def test_concurrent_identical_requests_store_one_array(isolation: Isolation) -> None:
    async with running(_app(isolation)) as client:
        tenant = await create_tenant(client, "acme")
        headers = {**tenant, "Idempotency-Key": "twins", "Content-Type": "application/json"}
        content = json.dumps({"items": _items(500)})
        answers = await asyncio.gather(
            *(client.post(ARRAYS, content=content, headers=headers, timeout=60) for _ in range(3))
        )
        assert sorted(a.status_code for a in answers) == [200, 200, 201], [a.text[:300] for a in answers]
        assert len({a.json()["array_id"] for a in answers}) == 1
        assert await _stored(isolation) == (500, 1000, 1)


async def test_a_tenant_cannot_submit_an_array_for_another_tenant(isolation: Isolation) -> None:
    async with running(_app(isolation)) as client:
        acme = await create_tenant(client, "acme")
        await create_tenant(client, "umbrella")
        body = {"items": _items(2)}
        refused = await client.post(ARRAYS, json=body, params={"tenant_id": "umbrella"}, headers=acme)
        assert refused.status_code == 403, refused.text
        unnamed = await client.post(ARRAYS, json=body, headers=ADMIN_HEADERS)
        assert unnamed.status_code == 422
        assert unnamed.json()["error"]["field"] == "tenant_id"
        assert await _stored(isolation) == (0, 0, 0)
        for_umbrella = await client.post(
            ARRAYS, json=body, params={"tenant_id": "umbrella"}, headers=ADMIN_HEADERS
        )
        assert for_umbrella.status_code == 201
        assert for_umbrella.json()["tenant_id"] == "umbrella"


async def test_an_item_of_a_budget_stopped_project_refuses_the_array(isolation: Isolation) -> None:
    async with running(_app(isolation)) as client:
        headers = await create_tenant(client, "acme")
        async with _schema(isolation) as conn:
            await conn.execute(
                "INSERT INTO budget_stops (tenant_id, project, month, reason) "
                "VALUES ('acme', 'vision', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM'), 'budget spent')"
            )
        items = [spec(tags={"project": "nlp"}), spec(tags={"project": "vision"}), spec(tags={})]
        refused = await client.post(ARRAYS, json={"items": items}, headers=headers)
        assert refused.status_code == 409, refused.text
        error = refused.json()["error"]
        assert error["field"] == "items.1.tags.project"
        assert [d["index"] for d in error["details"]] == [1]
        assert "new work refused: budget spent" in error["message"]
        assert await _stored(isolation) == (0, 0, 0)
