"""Quotas through the running service: clear refusals, and a rebuild after Redis loses its data."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from libs.common.events.scheduler import WorkloadPlacedV1
from libs.common.redis import Keyspace, create_redis
from services.scheduler.app import create_app
from services.scheduler.service import placer
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
from tests.integration.support import ADMIN_HEADERS, Isolation, TopicReader, eventually, running

FLUSHED_DB = 13


async def _quota(client: httpx.AsyncClient) -> dict[str, Any]:
    response = await client.get("/v1/admin/tenants/acme/quota", headers=ADMIN_HEADERS)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def test_quota_exhaustion_is_refused_naming_the_limit(isolation: Isolation) -> None:
    app = create_app(settings(isolation))
    async with running(app) as client, scheduler_reader(isolation) as reader:
        headers = await create_tenant(client, "acme")
        await register_gpus(isolation, count=4)
        await capacity_known(client, headers, 4)
        put = await client.put(
            "/v1/admin/tenants/acme/quota", json={"gpus": 2, "workloads": 1}, headers=ADMIN_HEADERS
        )
        assert put.status_code == 200, put.text

        too_big = await client.post("/v1/workloads", json=spec(count=3), headers=headers)
        assert too_big.status_code == 409
        assert "GPUs: limit 2" in too_big.json()["error"]["message"]

        first = (await client.post("/v1/workloads", json=spec(count=1), headers=headers)).json()[
            "workload_id"
        ]
        await reader.wait_for(
            lambda evs: any(isinstance(p, WorkloadPlacedV1) for p in of_workload(evs, first))
        )
        await eventually(lambda: _used(client, "workloads", 1), what="usage counted in Redis")

        refused = await client.post("/v1/workloads", json=spec(count=1), headers=headers)
        assert refused.status_code == 429
        error = refused.json()["error"]
        assert error["field"] == "quota.workloads"
        assert "concurrent workloads: limit 1, in use 1" in error["message"]


async def test_quota_of_more_ended_placements_than_one_batch_is_all_given_back(
    isolation: Isolation, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(placer, "_RELEASE_BATCH", 1)  # three ended placements: three rounds
    app = create_app(settings(isolation))
    async with running(app) as client, scheduler_reader(isolation) as reader:
        headers = await create_tenant(client, "acme")
        await register_gpus(isolation, count=3)
        await capacity_known(client, headers, 3)
        put = await client.put("/v1/admin/tenants/acme/quota", json={"gpus": 3}, headers=ADMIN_HEADERS)
        assert put.status_code == 200, put.text
        placed = await _three_placed(client, headers, reader)
        await eventually(lambda: _used(client, "gpus", 3), what="three GPUs counted")
        for one in placed:
            await agent_reports(isolation, one, outcome="completed")
        await eventually(lambda: _used(client, "gpus", 0), what="every ended placement's GPU given back")
        assert (await _quota(client))["usage"]["workloads"] == 0


async def _three_placed(
    client: httpx.AsyncClient, headers: dict[str, str], reader: TopicReader
) -> list[WorkloadPlacedV1]:
    """Three one-GPU workloads submitted, and their placements as read from the scheduler topic."""
    ids = [
        (await client.post("/v1/workloads", json=spec(count=1), headers=headers)).json()["workload_id"]
        for _ in range(3)
    ]
    events = await reader.wait_for(
        lambda evs: all(any(isinstance(p, WorkloadPlacedV1) for p in of_workload(evs, w)) for w in ids),
        what="three placements",
    )
    return [next(p for p in of_workload(events, w) if isinstance(p, WorkloadPlacedV1)) for w in ids]


async def _used(client: httpx.AsyncClient, dim: str, value: float) -> bool:
    return bool((await _quota(client))["usage"][dim] == value)


def _own_database(url: str) -> str:
    """The same Redis on a database of this test's own: FLUSHDB must not wipe other tests' keys."""
    return url.rsplit("/", 1)[0] + f"/{FLUSHED_DB}"


async def test_quotas_are_rebuilt_from_postgres_after_redis_flushdb(isolation: Isolation) -> None:
    redis_url = _own_database(isolation.infra.redis_url)
    app = create_app(settings(isolation, redis_url=redis_url))
    try:
        await _rebuild_flow(isolation, app, redis_url)
    finally:
        redis = create_redis(redis_url)
        try:
            await Keyspace(isolation.redis_prefix).clear(redis)
        finally:
            await redis.aclose()


async def _rebuild_flow(isolation: Isolation, app: FastAPI, redis_url: str) -> None:
    async with running(app) as client, scheduler_reader(isolation) as reader:
        headers = await create_tenant(client, "acme")
        await register_gpus(isolation, count=4)
        await capacity_known(client, headers, 4)
        await client.put("/v1/admin/tenants/acme/quota", json={"gpus": 3}, headers=ADMIN_HEADERS)
        done = (await _three_placed(client, headers, reader))[0]
        await agent_reports(isolation, done, outcome="completed")
        await eventually(lambda: _used(client, "gpus", 2), what="the finished job's GPU released")

        redis = create_redis(redis_url)
        try:
            await redis.flushdb()
        finally:
            await redis.aclose()
        await eventually(lambda: _used(client, "gpus", 2), what="usage rebuilt from Postgres")
        assert (await _quota(client))["limits"]["gpus"] == 3
        # The rebuilt limit still binds: two held + two asked > three.
        refused = await client.post("/v1/workloads", json=spec(count=2), headers=headers)
        assert refused.status_code == 429
        assert refused.json()["error"]["field"] == "quota.gpus"
