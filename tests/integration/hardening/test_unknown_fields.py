"""A request body with a field the API does not know is refused with a 422 naming it, and changes nothing.

An unknown field used to be dropped: a typo ("resource", "regex") or a field from another version was
silently ignored, and the caller believed it had been applied.
"""

from __future__ import annotations

import asyncpg
import httpx

from services.alerting.app import create_app as alerting_app
from services.scheduler.app import create_app as scheduler_app
from tests.integration.alerting.helpers import alerting_settings
from tests.integration.scheduler.helpers import create_tenant, settings, spec
from tests.integration.support import ADMIN_HEADERS, Isolation, running


async def _count(iso: Isolation, table: str) -> int:
    conn = await asyncpg.connect(iso.infra.database_url)
    try:
        value: int = await conn.fetchval(f'SELECT count(*) FROM "{iso.schema("scheduler")}".{table}')
        return value
    finally:
        await conn.close()


def _refused(response: httpx.Response, field: str) -> None:
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    name = field.rsplit(".", 1)[-1]
    assert (error["field"], error["message"]) == (field, f"{field}: unknown field {name!r}")


async def test_a_workload_body_with_an_unknown_field_is_refused_naming_it(isolation: Isolation) -> None:
    async with running(scheduler_app(settings(isolation))) as client:
        acme = await create_tenant(client, "acme")
        network = {**spec()["network"], "firewall": "open"}
        for body, field in [(spec(colour="red"), "colour"), (spec(network=network), "network.firewall")]:
            _refused(await client.post("/v1/workloads", json=body, headers=acme), field)
        assert await _count(isolation, "workloads") == 0
        accepted = await client.post("/v1/workloads", json=spec(), headers=acme)
        assert accepted.status_code == 201, accepted.text


async def test_a_draft_or_a_draft_step_with_an_unknown_field_is_refused_naming_it(
    isolation: Isolation,
) -> None:
    async with running(scheduler_app(settings(isolation))) as client:
        acme = await create_tenant(client, "acme")
        _refused(await client.post("/v1/workloads/drafts", json={"option": {}}, headers=acme), "option")
        assert await _count(isolation, "drafts") == 0
        opened = await client.post("/v1/workloads/drafts", json={}, headers=acme)
        assert opened.status_code == 201, opened.text
        steps = f"/v1/workloads/drafts/{opened.json()['draft_id']}"
        image = {"name": "pytorch", "version": "2.3", "tag": "latest"}
        _refused(await client.put(f"{steps}/image", json=image, headers=acme), "image.tag")
        resources = {"kind": "gpu", "model": "A100-80GB", "count": 1, "gpus": 2}
        _refused(await client.put(f"{steps}/resources", json=resources, headers=acme), "resources.gpus")
        draft = (await client.get(steps, headers=acme)).json()
        assert draft["missing"] == ["image", "resources", "network"]


async def test_alerting_refuses_unknown_fields_in_matchers_and_routes(isolation: Isolation) -> None:
    async with running(alerting_app(alerting_settings(isolation))) as client:
        before = (await client.get("/v1/routes", headers=ADMIN_HEADERS)).json()
        tree = {"default": {**before["default"], "continue": True}}
        _refused(await client.put("/v1/routes", json=tree, headers=ADMIN_HEADERS), "default.continue")
        assert (await client.get("/v1/routes", headers=ADMIN_HEADERS)).json() == before
        silence = {
            "matchers": [{"name": "alertname", "value": "GpuHot", "regex": True}],
            "ends_at": "2999-01-01T00:00:00Z",
            "comment": "maintenance",
        }
        refused = await client.post("/v1/silences", json=silence, headers=ADMIN_HEADERS)
        _refused(refused, "matchers.0.regex")
        assert (await client.get("/v1/silences", headers=ADMIN_HEADERS)).json() == []
