"""What one tenant sends to the running scheduler cannot grow into an event nobody can publish.

A 10 MB tag once became an event larger than the broker takes; the relay then failed on it forever and
every later scheduler event waited behind it. Each refusal here is a 4xx naming the field and changes
nothing.
"""

from __future__ import annotations

from typing import Any

import asyncpg
import httpx

from services.scheduler.app import create_app
from tests.integration.scheduler.helpers import create_tenant, settings, spec
from tests.integration.support import Isolation, running


async def _count(iso: Isolation, table: str) -> int:
    conn = await asyncpg.connect(iso.infra.database_url)
    try:
        value: int = await conn.fetchval(f'SELECT count(*) FROM "{iso.schema("scheduler")}".{table}')
        return value
    finally:
        await conn.close()


def _field(response: httpx.Response, status: int = 422) -> str | None:
    assert response.status_code == status, response.text
    field: str | None = response.json()["error"]["field"]
    return field


async def test_oversized_and_unprintable_workload_input_is_refused_and_nothing_is_created(
    isolation: Isolation,
) -> None:
    async with running(create_app(settings(isolation))) as client:
        acme = await create_tenant(client, "acme")
        refusals: list[tuple[dict[str, Any], int, str]] = [
            (spec(tags={"team": "x" * 10_000_000}), 413, "body"),
            (spec(tags={f"k{i}": "v" for i in range(1000)}), 422, "tags"),
            (spec(tags={"team": "a\x01\x1bb"}), 422, "tags.team"),
            (spec(tags={"team": "a\x00b"}), 422, "tags.team"),
            (spec(tags={"project": "a\x01\x1bb"}), 422, "tags.project"),
            (spec(tags={"project": "\u202e\U0001f600"}), 422, "tags.project"),
            (spec(constraints={"zone": "z" * 300}), 422, "constraints.zone"),
            (spec(image={"name": "p" * 10_000, "version": "2.3"}), 422, "image.name"),
        ]
        for body, status, field in refusals:
            response = await client.post("/v1/workloads", json=body, headers=acme)
            assert _field(response, status) == field
        assert await _count(isolation, "workloads") == 0
        accepted = await client.post(
            "/v1/workloads", json=spec(tags={"project": "vision.v2_a-b"}), headers=acme
        )
        assert accepted.status_code == 201, accepted.text
        assert await _count(isolation, "workloads") == 1


async def test_an_empty_or_null_body_opens_no_draft(isolation: Isolation) -> None:
    async with running(create_app(settings(isolation))) as client:
        acme = await create_tenant(client, "acme")
        empty = await client.post("/v1/workloads/drafts", headers=acme)
        assert _field(empty) == "body"
        null = await client.post(
            "/v1/workloads/drafts", content=b"null", headers={**acme, "content-type": "application/json"}
        )
        assert _field(null) == "body"
        bad_option = await client.post(
            "/v1/workloads/drafts", json={"options": {"tags": {"project": "a\x01b"}}}, headers=acme
        )
        assert _field(bad_option) == "options.tags.project"
        assert await _count(isolation, "drafts") == 0
        opened = await client.post("/v1/workloads/drafts", json={"options": {"urgency": 0.7}}, headers=acme)
        assert opened.status_code == 201, opened.text
        assert opened.json()["steps"]["options"] == {"urgency": 0.7}
        assert await _count(isolation, "drafts") == 1
