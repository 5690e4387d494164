"""Inhibition rules as stored configuration: the global set and each tenant's, JSON or Alertmanager YAML."""

from __future__ import annotations

import yaml

from services.alerting.adapters.config_store import ConfigStore
from services.alerting.app import create_app
from services.alerting.domain.inhibition import DEFAULT_INHIBIT_RULES
from tests.integration.alerting.helpers import alerting_settings
from tests.integration.support import (
    ADMIN_HEADERS,
    Isolation,
    eventually,
    key_works,
    provision_tenant,
    running,
)

RULE_FILE = """
route: {receiver: pager}
inhibit_rules:
  - source_matchers: ['alertname="NodeDown"']
    target_matchers: [severity=warning]
    equal: [node]
"""


async def test_inhibit_rules_are_stored_per_tenant_confined_and_read_from_alertmanager_yaml(
    isolation: Isolation,
) -> None:
    app = create_app(alerting_settings(isolation))
    async with running(app) as client:
        key = await provision_tenant(isolation, "acme")
        await eventually(lambda: key_works(client, key, "/v1/inhibit-rules"), what="tenant key replicated")
        acme = {"X-API-Key": key}
        shipped = (await client.get("/v1/inhibit-rules", headers=ADMIN_HEADERS)).json()
        assert len(shipped) == len(DEFAULT_INHIBIT_RULES)
        assert (await client.get("/v1/inhibit-rules", headers=acme)).json() == []

        imported = await client.put("/v1/inhibit-rules/file", content=RULE_FILE, headers=acme)
        assert imported.status_code == 200, imported.text
        [rule] = imported.json()
        assert {"name": "tenant", "op": "=", "value": "acme"} in rule["source_matchers"]
        assert {"name": "tenant", "op": "=", "value": "acme"} in rule["target_matchers"]
        exported = yaml.safe_load((await client.get("/v1/inhibit-rules/file", headers=acme)).text)
        assert exported["inhibit_rules"][0]["target_matchers"] == ['severity="warning"', 'tenant="acme"']

        escape = [{"source_matchers": [{"name": "tenant", "value": "other"}], "target_matchers": []}]
        refused = await client.put("/v1/inhibit-rules", json=escape, headers=acme)
        assert (refused.status_code, refused.json()["error"]["field"]) == (422, "0.source_matchers.0")
        broken = await client.put(
            "/v1/inhibit-rules/file", content="inhibit_rules: [{equal: node}]", headers=acme
        )
        assert (broken.status_code, broken.json()["error"]["field"]) == (422, "inhibit_rules.0")
        not_yaml = await client.put("/v1/inhibit-rules/file", content="inhibit_rules: [", headers=acme)
        assert (not_yaml.status_code, not_yaml.json()["error"]["field"]) == (422, "body")
        typo = [{"source_matchers": [], "target_matchers": [], "equals": ["node"]}]
        assert (await client.put("/v1/inhibit-rules", json=typo, headers=ADMIN_HEADERS)).status_code == 422
        assert (
            await client.get("/v1/inhibit-rules", headers=acme, params={"tenant": "other"})
        ).status_code == 403

        replaced = await client.put("/v1/inhibit-rules", json=shipped[:1], headers=ADMIN_HEADERS)
        assert replaced.status_code == 200, replaced.text
        async with app.state.runtime.pool.acquire() as conn:
            effective = await ConfigStore(conn).all_inhibit_rules()
        assert [r.model_dump(mode="json") for r in effective] == [*shipped[:1], rule]
