"""`make demo` on a suite in use, twice: the tour keeps to its own tenants, receiver, route and rule, a
second run succeeds, and the README's tenant (acme) and the operators' routes are left as they were.

The tour's setup steps (tenants, keys, shares, quotas, the instance and jobs, the queue, the pager's
receiver, route and rule) run against the whole suite; the steps that wait minutes for a page, a
recovery and a bill are left out.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Awaitable
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx

from tests.integration.flows.suite import Suite, fleet_gpus, running_suite
from tests.integration.support import ADMIN_HEADERS, Isolation

DEMO = Path(__file__).resolve().parents[3] / "scripts" / "demo.py"
ACME_ROUTE = {"receiver": "acme-oncall", "matchers": [{"name": "severity", "op": "=", "value": "critical"}]}


def _demo() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpucloud_demo", DEMO)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def _ok(response: Awaitable[httpx.Response]) -> Any:
    resolved = await response
    assert resolved.status_code < 400, resolved.text
    return resolved.json()


async def _acme_in_use(suite: Suite) -> None:
    """What a team set up on the suite before anyone ran the tour."""
    await _ok(
        suite.scheduler.post(
            "/v1/admin/tenants", json={"tenant_id": "acme", "name": "Acme ML"}, headers=ADMIN_HEADERS
        )
    )
    await _ok(suite.scheduler.put("/v1/admin/tenants/acme/share", json={"shares": 5}, headers=ADMIN_HEADERS))
    quota = {"gpus": 3, "units": 40, "workloads": 6}
    await _ok(suite.scheduler.put("/v1/admin/tenants/acme/quota", json=quota, headers=ADMIN_HEADERS))
    receiver = {"name": "acme-oncall", "kind": "webhook", "url": "http://127.0.0.1:9/acme"}
    await _ok(suite.alerting.post("/v1/receivers", json=receiver, headers=ADMIN_HEADERS))
    tree = {"default": {"receiver": "acme-oncall", "group_wait": 5}, "routes": [ACME_ROUTE]}
    await _ok(suite.alerting.put("/v1/routes", json=tree, headers=ADMIN_HEADERS))


async def _settings_of_others(suite: Suite) -> dict[str, Any]:
    share = await _ok(suite.scheduler.get("/v1/admin/tenants/acme/share", headers=ADMIN_HEADERS))
    quota = await _ok(suite.scheduler.get("/v1/admin/tenants/acme/quota", headers=ADMIN_HEADERS))
    routes = await _ok(suite.alerting.get("/v1/routes", headers=ADMIN_HEADERS))
    receiver = await _ok(suite.alerting.get("/v1/receivers/acme-oncall", headers=ADMIN_HEADERS))
    return {
        "acme shares": share["shares"],
        "acme quota": quota["limits"],
        "default route": routes["default"],
        "other routes": [r for r in routes["routes"] if r["receiver"] != "tour-pager"],
        "acme receiver": receiver["url"],
    }


async def test_the_tour_runs_twice_on_a_used_suite_and_leaves_other_tenants_settings_alone(
    isolation: Isolation, tmp_path: Path
) -> None:
    demo = _demo()
    async with running_suite(isolation, tmp_path) as suite:
        await _acme_in_use(suite)
        before = await _settings_of_others(suite)
        tour = demo.Tour(base_port=suite.stack.base_port, admin_key=ADMIN_HEADERS["X-API-Key"])
        gpu = fleet_gpus()["fa-a100"][0]

        def one_run(n: int) -> str:
            keys = demo.prepare(tour)
            demo.fleet(tour, keys[demo.TENANT])
            instance: str = demo.instance(tour, keys[demo.TENANT])
            demo.jobs(tour, keys)
            demo.queue(tour, keys[demo.TENANT], instance)
            url, secret = f"http://127.0.0.1:9/tour-run-{n}", f"tour-run-{n}-secret-0123456789"
            demo.pager_setup(tour, keys[demo.TENANT], gpu=gpu, url=url, secret=secret)
            return instance

        first = await asyncio.to_thread(one_run, 1)
        second = await asyncio.to_thread(one_run, 2)  # once failed: 422 `kind: Field required`

        assert await _settings_of_others(suite) == before
        routes = await _ok(suite.alerting.get("/v1/routes", headers=ADMIN_HEADERS))
        assert [r["receiver"] for r in routes["routes"]] == ["tour-pager", "acme-oncall"]  # one tour route
        assert routes["routes"][0]["matchers"] == [{"name": "alertname", "op": "=", "value": demo.RULE}]
        pager = await _ok(suite.alerting.get("/v1/receivers/tour-pager", headers=ADMIN_HEADERS))
        assert pager["url"] == "http://127.0.0.1:9/tour-run-2"
        rule = await _ok(suite.alerting.get(f"/v1/rules/{demo.RULE}", headers=ADMIN_HEADERS))
        assert rule["owner_tenant"] == demo.TENANT
        tour_share = await _ok(suite.scheduler.get("/v1/admin/tenants/tour/share", headers=ADMIN_HEADERS))
        assert tour_share["shares"] == 2
        earlier = await _ok(suite.scheduler.get(f"/v1/workloads/{first}", headers=ADMIN_HEADERS))
        assert earlier["state"] == "cancelled"  # the second run retired the first one's work
        latest = await _ok(suite.scheduler.get(f"/v1/workloads/{second}", headers=ADMIN_HEADERS))
        assert latest["tenant_id"] == demo.TENANT
