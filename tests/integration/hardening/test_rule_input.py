"""Rules on the running alerting service: bad input is a 422 naming the problem, and names are per tenant.

Non-finite thresholds, a `for` that overflowed, a `!!python/...` tag in a rule import and a silence
regex with catastrophic backtracking each once gave a 500 or was accepted; another tenant's rule name
answered 409, revealing it.
"""

from __future__ import annotations

from typing import Any

import httpx

from services.alerting.app import create_app
from tests.integration.alerting.helpers import alerting_settings
from tests.integration.support import (
    ADMIN_HEADERS,
    Isolation,
    eventually,
    key_works,
    provision_tenant,
    running,
)

RULE = {"name": "Hot", "metric": "gpu_temp_c", "threshold": 80, "for": "1m"}


async def _tenant(isolation: Isolation, client: httpx.AsyncClient, tenant: str) -> dict[str, str]:
    key = await provision_tenant(isolation, tenant)
    await eventually(lambda: key_works(client, key, "/v1/rules"), what=f"{tenant}'s key replicated")
    return {"X-API-Key": key}


def _refused(response: httpx.Response, status: int = 422) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    return error


async def _names(client: httpx.AsyncClient, headers: dict[str, str]) -> list[tuple[str, str | None]]:
    rules = (await client.get("/v1/rules", headers=headers)).json()
    return sorted((r["name"], r["owner_tenant"]) for r in rules if r["owner_tenant"] is not None)


async def test_bad_rule_and_silence_input_is_a_422_naming_the_problem_and_changes_nothing(
    isolation: Isolation,
) -> None:
    async with running(create_app(alerting_settings(isolation))) as client:
        acme = await _tenant(isolation, client, "acme")
        json_headers = {**acme, "content-type": "application/json"}
        for literal in ("NaN", "Infinity", "-Infinity"):
            body = f'{{"name": "Hot", "metric": "gpu_temp_c", "threshold": {literal}}}'
            error = _refused(await client.post("/v1/rules", content=body, headers=json_headers))
            assert error["field"] == "threshold"
        endless = await client.post("/v1/rules", json={**RULE, "for": "1000000000000h"}, headers=acme)
        error = _refused(endless)
        assert (error["field"], "the maximum of 365d" in error["message"]) == ("for", True)

        rule_file = (
            "groups:\n  - name: g\n    rules:\n"
            "      - alert: !!python/object/apply:os.system ['touch /tmp/pwned']\n"
            "        expr: gpucloud_gpu_temp_c > 80\n"
        )
        error = _refused(await client.post("/v1/rules/import", content=rule_file, headers=acme))
        assert error["field"] == "body"
        assert "tag !!python/object/apply:os.system is not allowed" in error["message"]
        assert "line 4, column 16" in error["message"]

        silence = {
            "matchers": [{"name": "node", "op": "=~", "value": "(a+)+$"}],
            "ends_at": "2999-01-01T00:00:00Z",
            "comment": "maintenance",
        }
        error = _refused(await client.post("/v1/silences", json=silence, headers=acme))
        assert error["field"] == "matchers.0"
        assert "a quantified group holds another quantifier" in error["message"]

        assert await _names(client, ADMIN_HEADERS) == []
        assert (await client.get("/v1/silences", headers=ADMIN_HEADERS)).json() == []


async def test_two_tenants_each_have_a_rule_of_one_name_and_neither_sees_the_others(
    isolation: Isolation,
) -> None:
    async with running(create_app(alerting_settings(isolation))) as client:
        acme, globex = await _tenant(isolation, client, "acme"), await _tenant(isolation, client, "globex")
        assert (await client.post("/v1/rules", json=RULE, headers=acme)).status_code == 201
        theirs = await client.post("/v1/rules", json={**RULE, "threshold": 60}, headers=globex)
        assert theirs.status_code == 201, theirs.text  # was 409: "a rule named 'Hot' exists"
        assert _refused(await client.post("/v1/rules", json=RULE, headers=acme), 409)["field"] == "name"

        assert (await client.get("/v1/rules/Hot", headers=acme)).json()["threshold"] == 80
        assert (await client.get("/v1/rules/Hot", headers=globex)).json()["threshold"] == 60
        assert await _names(client, acme) == [("Hot", "acme")]
        assert await _names(client, globex) == [("Hot", "globex")]
        imported = "groups: [{name: g, rules: [{alert: Hot, expr: gpucloud_gpu_temp_c > 70}]}]"
        assert _refused(await client.post("/v1/rules/import", content=imported, headers=globex), 409)
        replaced = await client.post("/v1/rules/import?replace=true", content=imported, headers=globex)
        assert replaced.json()["replaced"] == ["Hot"]
        assert (await client.get("/v1/rules/Hot", headers=globex)).json()["threshold"] == 70
        assert (await client.get("/v1/rules/Hot", headers=acme)).json()["threshold"] == 80

        # A global name stays reserved: a tenant's rule of that name would take the global one's alerts.
        global_name = await client.post("/v1/rules", json={**RULE, "name": "GpuMemoryHigh"}, headers=acme)
        assert _refused(global_name, 409)["message"] == "a global rule is named 'GpuMemoryHigh'"

        error = _refused(await client.get("/v1/rules/Hot", headers=ADMIN_HEADERS), 409)
        assert error["field"] == "owner_tenant"
        assert await _names(client, ADMIN_HEADERS) == [("Hot", "acme"), ("Hot", "globex")]
        chosen = await client.get("/v1/rules/Hot", params={"owner_tenant": "globex"}, headers=ADMIN_HEADERS)
        assert chosen.json()["threshold"] == 70

        assert (await client.delete("/v1/rules/Hot", headers=globex)).status_code == 204
        assert await _names(client, ADMIN_HEADERS) == [("Hot", "acme")]
        assert (await client.get("/v1/rules/Hot", headers=globex)).status_code == 404
        assert (await client.get("/v1/rules/Hot", headers=ADMIN_HEADERS)).json()["owner_tenant"] == "acme"
